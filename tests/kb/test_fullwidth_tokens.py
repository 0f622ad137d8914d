"""Full-width letters and digits (１８８７, ＩＢＭ) are searchable as ASCII, and an index built
by the older tokenizer, which dropped them, is rebuilt rather than trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag.store.keyword import TOKENIZER_VERSION, BM25Index
from crag.text import keywords, tokenize

TEXTS = {
    "a": "纽约州联盟和安大略联盟在1886年合并成国际联盟，1887年东方联盟也加入此联盟。",
    "b": "国际联盟是位于美国东部的美国职棒小联盟其中一个联盟。",
    "c": "IBM was founded in 1911 in Endicott, New York.",
}


@pytest.mark.unit
def test_full_width_letters_and_digits_tokenise_as_ascii() -> None:
    assert tokenize("１８８７年东方联盟") == tokenize("1887年东方联盟")
    assert "ibm" in tokenize("ＩＢＭ公司") and "1887" in keywords("１８８７年什么联盟加入了国际联盟？")


@pytest.mark.unit
def test_a_full_width_query_finds_the_ascii_passage(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path / "bm25")
    idx.rebuild(list(TEXTS), lambda ids: {i: TEXTS[i] for i in ids}, generation=1)
    assert idx.search("１８８７年什么联盟加入了国际联盟？", k=1)[0][0] == "a"
    assert idx.search("When was ＩＢＭ founded?", k=1)[0][0] == "c"


@pytest.mark.unit
def test_an_index_from_the_older_tokenizer_is_rebuilt(tmp_path: Path) -> None:
    idx = BM25Index(tmp_path / "bm25")
    idx.rebuild(list(TEXTS), lambda ids: {i: TEXTS[i] for i in ids}, generation=3)
    meta = tmp_path / "bm25" / "crag_meta.json"
    info = json.loads(meta.read_text("utf-8"))
    assert info["tokenizer"] == TOKENIZER_VERSION
    fresh = BM25Index(tmp_path / "bm25")
    fresh.load()
    assert fresh.generation == 3  # same tokenizer: trusted as is
    del info["tokenizer"]  # what an index saved before the change looks like
    meta.write_text(json.dumps(info), "utf-8")
    old = BM25Index(tmp_path / "bm25")
    old.load()
    assert old.generation == -1 and old.load_error == ""  # stale, so the knowledge base rebuilds it
