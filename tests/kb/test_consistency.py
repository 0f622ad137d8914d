"""The consistency part of a knowledge base (crag.kb.consistency) on its own.

Crash and cross-process tests use real processes, the real manifest and real Chroma: a child
process is SIGKILLed at an exact point of its write (inside the manifest commit), or commits a
file, and this process checks what the next reader and writer see. The control-flow tests use a
small in-memory store with and without the optional store capabilities, to show that a feature
a store does not declare is never called.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crag.errors import ConfigError, KnowledgeBaseError
from crag.kb import KnowledgeBase
from crag.kb.consistency import DIRTY, Consistency, open_manifest
from crag.protocols import FilteringStore, RefreshableStore, ReleasableStore, VectorStore
from crag.store.backfill import METADATA_IN_STORE
from crag.store.chroma import ChromaVectorStore
from crag.store.writelock import WriteLock
from crag.testing.fakes import HashEmbedder
from crag.types import Chunk

ROOT = Path(__file__).resolve().parents[2]
DOCS = {
    "a.txt": "Beijing is the capital of China. 北京是中国的首都。",
    "b.txt": "Paris is the capital of France. 巴黎是法国的首都。",
    "c.txt": "Tokyo is the capital of Japan. 东京是日本的首都。",
}


class PlainStore:
    """The VectorStore protocol and nothing more (no refresh, release, filters)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        for i, v, m in zip(ids, vectors, metadatas, strict=True):
            self.rows[i] = (np.asarray(v, dtype=np.float32), dict(m))

    def delete(self, ids: Sequence[str]) -> None:
        for i in ids:
            self.rows.pop(i, None)

    def all_ids(self) -> set[str]:
        return set(self.rows)

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float, np.ndarray | None]]:
        scored = sorted(((float(v @ vector), i, v) for i, (v, _) in self.rows.items()), reverse=True)
        return [(i, s, v) for s, i, v in scored[:k]]

    def count(self) -> int:
        return len(self.rows)

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self.rows[i][0] for i in ids if i in self.rows}


class ViewStore(PlainStore):
    """Declares RefreshableStore and ReleasableStore, and counts the calls."""

    def __init__(self) -> None:
        super().__init__()
        self.refreshed = self.released = self.warmed = 0

    def refresh(self) -> None:
        self.refreshed += 1

    def release(self) -> None:
        self.released += 1

    def warm_up(self) -> None:
        self.warmed += 1


def commit(state: Consistency, name: str) -> None:
    """Another process's commit, as far as ``state`` can tell: the manifest's generation moves."""
    state.manifest.replace_file(name, "sha", [Chunk(f"id-{name}", f"text of {name}", name)], "now")


def test_capabilities_are_declared_protocols() -> None:
    plain, view = PlainStore(), ViewStore()
    assert isinstance(plain, VectorStore) and isinstance(view, VectorStore)
    assert not isinstance(plain, RefreshableStore) and not isinstance(plain, ReleasableStore)
    assert isinstance(view, RefreshableStore) and isinstance(view, ReleasableStore)
    assert not isinstance(view, FilteringStore)  # a query(where=...) is declared, never guessed
    chroma = ChromaVectorStore("/nonexistent/never-opened")
    assert all(isinstance(chroma, p) for p in (FilteringStore, RefreshableStore, ReleasableStore))


def test_open_manifest_records_the_embedder_and_refuses_another(tmp_path: Path) -> None:
    open_manifest(tmp_path / "kb", "model-a").close()
    assert open_manifest(tmp_path / "kb", "model-a").get_meta("embedder") == "model-a"
    with pytest.raises(KnowledgeBaseError, match="built with embedder 'model-a', not 'model-b'"):
        open_manifest(tmp_path / "kb", "model-b")


def test_a_reader_reopens_only_after_another_commit_and_never_waits(tmp_path: Path) -> None:
    store = ViewStore()
    state = Consistency(tmp_path, open_manifest(tmp_path, "m"), store)
    state.follow_writes()
    assert store.refreshed == 0  # nothing committed since the view was taken: one SQLite read
    commit(state, "a")
    other = WriteLock(tmp_path / "write.lock")  # another process mid-write
    with other.hold(what="test"):
        state.follow_writes()
        assert store.refreshed == 0 and state.view != state.manifest.generation  # kept the old view
    state.follow_writes()
    assert store.refreshed == 1 and state.view == state.manifest.generation
    state.follow_writes()
    assert store.refreshed == 1


def test_a_writer_catches_up_before_writing(tmp_path: Path) -> None:
    store = ViewStore()
    state = Consistency(tmp_path, open_manifest(tmp_path, "m"), store)
    commit(state, "a")  # written by another process since our view
    with state.writing("ingest"):
        assert store.refreshed == 1 and state.view == state.manifest.generation
        commit(state, "b")  # our own commit
    assert state.view == state.manifest.generation
    with state.writing("ingest"):
        pass
    assert store.refreshed == 1  # nothing new: no reopen
    state.manifest.set_meta(DIRTY, "1")  # a writer died mid-write
    with state.writing("ingest"):
        assert store.refreshed == 2 and state.manifest.get_meta(DIRTY) == "0"


def test_a_released_index_is_loaded_by_the_next_search_under_the_lock(tmp_path: Path) -> None:
    store = ViewStore()
    state = Consistency(tmp_path, open_manifest(tmp_path, "m"), store)
    with state.writing("ingest"):
        state.release_vectors()
    assert state.released and store.released == 1 and store.warmed == 0
    with WriteLock(tmp_path / "write.lock").hold(what="test"):
        state.follow_writes()
        assert state.released and store.warmed == 0  # a writer may be persisting: wait for the next search
    state.follow_writes()
    assert not state.released and store.warmed == 1


def test_undeclared_capabilities_are_never_called(tmp_path: Path) -> None:
    store = PlainStore()
    state = Consistency(tmp_path, open_manifest(tmp_path, "m"), store)
    commit(state, "a")
    state.follow_writes()  # nothing to refresh: the view moves on
    with state.writing("ingest"):
        state.release_vectors()
    assert not state.released and state.view == state.manifest.generation
    assert state.reopen() is True
    with pytest.raises(ConfigError, match="PlainStore cannot filter by metadata"):
        state.filtering_store()


def test_filters_wait_for_the_metadata_upgrade(tmp_path: Path) -> None:
    store = ChromaVectorStore(tmp_path / "chroma")
    state = Consistency(tmp_path, open_manifest(tmp_path, "m"), store)
    state.warm_up()  # an empty knowledge base needs no upgrade: marked done
    assert state.filtering_store() is store
    state.manifest.set_meta(METADATA_IN_STORE, "0")  # another process is upgrading it
    with pytest.raises(KnowledgeBaseError, match="being upgraded for metadata filters"):
        state.filtering_store()


def write_docs(folder: Path) -> Path:
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, "utf-8")
    return folder


CHILD = """
import os, signal, sys
from crag.kb import KnowledgeBase
from crag.store.manifest import Manifest
from crag.testing.fakes import HashEmbedder

kb, docs, die_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
commit = Manifest.replace_file
calls = []

def dying(self, *args, **kw):
    calls.append(1)
    if len(calls) == die_at:  # this file's vectors are written; its manifest rows are not
        os.kill(os.getpid(), signal.SIGKILL)
    return commit(self, *args, **kw)

Manifest.replace_file = dying
KnowledgeBase(kb, HashEmbedder()).ingest([docs])
"""


def run_child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    code = textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


def test_kill_9_inside_a_commit_leaves_orphans_that_the_next_open_removes(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    done = run_child(CHILD, str(tmp_path / "kb"), str(docs), "2")
    assert done.returncode == -9, done.stderr
    raw = ChromaVectorStore(tmp_path / "kb" / "chroma")
    before = raw.all_ids()
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder())  # opens nothing yet
    assert len(before) == 2 and kb.manifest.get_meta(DIRTY) == "0"  # first use: cleaned up
    after = kb.vectors.all_ids()
    assert after == kb.manifest.chunk_ids() and len(after) == 1 and after < before
    assert kb.stats()["files"] == 1
    report = kb.ingest([docs])  # the next run finishes the job
    assert report.count("added") == 2 and report.count("unchanged") == 1
    assert kb.vectors.all_ids() == kb.manifest.chunk_ids() and len(kb.vectors.all_ids()) == 3


WRITER = """
import sys
from crag.kb import KnowledgeBase
from crag.testing.fakes import HashEmbedder

KnowledgeBase(sys.argv[1], HashEmbedder()).ingest([sys.argv[2]])
"""


def test_a_reader_sees_another_process_commit_by_vector_too(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder())
    kb.ingest([docs])
    assert kb.search("capital of China", k=1)[0].chunk.title == "a"  # the store is open, its view taken
    view = kb.consistency.view
    new = tmp_path / "new.txt"
    new.write_text("The Zorblax river flows through Quendia. 佐布拉克斯河流经昆迪亚。", "utf-8")
    done = run_child(WRITER, str(tmp_path / "kb"), str(new))
    assert done.returncode == 0, done.stderr
    hit = kb.search("Zorblax river Quendia", k=1)[0]
    assert hit.chunk.title == "new" and kb.consistency.view == kb.manifest.generation > view
    # The vector index itself has it: this process's store view was reopened, not only the keyword index.
    qv = HashEmbedder().embed(["Zorblax river Quendia"], kind="query")[0]
    assert kb.vectors.query(qv, 1)[0][0] == hit.chunk.id and hit.dense is not None
