"""The CLI indexes a corpus search's corpus before the first question, not inside its timeout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag.cli._common import warm_search
from crag.engine import CRAG
from crag.testing.fakes import HashEmbedder

pytestmark = pytest.mark.unit


def test_the_corpus_is_indexed_up_front_and_searches_then_find_it(tmp_path: Path) -> None:
    corpus = tmp_path / "web.jsonl"
    rows = [{"title": f"t{i}", "url": f"https://e.org/{i}", "text": f"Passage {i} about zebras."} for i in range(5)]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    rag = CRAG.from_config(kb={"path": tmp_path / "kb"}, search={"provider": "corpus", "corpus_path": corpus})
    rag._embedder = HashEmbedder()  # the fake embedder: this test is about when indexing happens
    assert not (tmp_path / "kb" / "corpora").exists()
    warm_search(rag, None, None)
    assert any((tmp_path / "kb" / "corpora").iterdir())  # indexed before any question
    provider = rag.search_provider()
    assert provider is not None and provider.search("zebras", k=2)


def test_providers_without_a_corpus_have_nothing_to_warm(tmp_path: Path) -> None:
    rag = CRAG.from_config(kb={"path": tmp_path / "kb"}, search={"provider": "none"})
    warm_search(rag, None, None)  # no provider: nothing happens, nothing raises
    assert rag.search_provider() is None


def test_serve_indexes_each_existing_collections_corpus_before_the_first_request(tmp_path: Path) -> None:
    from crag.cli.serve import warm_collections

    corpus = tmp_path / "web.jsonl"
    row = {"title": "t", "url": "https://e.org/1", "text": "Zebras are striped."}
    corpus.write_text(json.dumps(row) + "\n", "utf-8")
    (tmp_path / "a").mkdir()
    rag = CRAG.from_config(
        kb={"path": tmp_path / "a"},
        search={"provider": "corpus", "corpus_path": corpus},
        server={"collections": {"a": str(tmp_path / "a"), "later": str(tmp_path / "later")}},
    )
    rag._embedder = HashEmbedder()  # shared by the collections' engines: this test is about when indexing happens
    warm_collections(rag)
    assert any((tmp_path / "a" / "corpora").iterdir())  # indexed before any request
    assert not (tmp_path / "later").exists()  # a knowledge base not created yet is not created by warming
