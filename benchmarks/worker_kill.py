"""kill -9 of an ingest worker in the middle of a 200-file job: another worker finishes it.

One PostgreSQL (the state database: documents, the job and procrastinate's queue) and one Milvus
Lite gRPC server (vectors and BM25), both started here on 127.0.0.1; two ``crag worker``
processes, each in its own empty folder, as two machines would run them. The job (200 Markdown
files, several chunks each) is queued the way ``POST /v1/ingest`` queues it; the first worker is
killed (SIGKILL, its whole process group) a fifth of the way in; the second finds the job stalled
(no heartbeat for ``--stalled-after`` seconds), runs it again, and the ingest skips what the first
committed. Figures: seconds to the kill, to the job's end, attempts, documents stored (each once),
and the chunks in Milvus against the chunks in PostgreSQL.

    python benchmarks/worker_kill.py [--files 200]

Prints a table and writes ``benchmarks/out/worker_kill/worker_kill.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from crag.engine import CRAG
from crag.jobs import JOBS, JobFile, JobStore
from crag.server.collections import Collection
from crag.server.jobs import queue_ingest
from crag.state import state_for
from crag.testing.milvus_server import local_milvus_lite_server
from crag.testing.postgres_server import LocalPostgres

OUT = Path(__file__).resolve().parent / "out" / "worker_kill"
WORDS = "river lighthouse keeper harbour signal storm granite lantern tide beacon ledger quay".split()


def text(i: int) -> bytes:
    """File ``i``: several chunks of text no other file shares."""
    lines = [f"# Bulletin {i}", ""]
    for p in range(8):
        words = " ".join(WORDS[(i + p + k) % len(WORDS)] for k in range(40))
        lines += [f"Bulletin {i} paragraph {p}: the Zorblax {words} reading {i * 100 + p}.", ""]
    return "\n".join(lines).encode()


def settings(pg_url: str, milvus: str) -> dict[str, str]:
    port = milvus.rsplit(":", 1)[1]
    return {
        "CRAG_KB__STATE_URI": pg_url,
        "CRAG_KB__NAME": "bulletins",
        "CRAG_KB__STORE_URI": f"milvus://127.0.0.1:{port}?collection=kb_bulletins",
        "CRAG_KB__KEYWORD_INDEX": "store",
        "CRAG_KB__COMMIT_CHUNKS": "16",  # a commit every two files or so: the kill lands between commits
        "CRAG_SEARCH__PROVIDER": "none",
    }


def worker(folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True)
    cmd = [sys.executable, "-m", "crag.cli", "worker", "--kb", str(folder / "kb"), "--heartbeat", "1"]
    cmd += ["--stalled-after", "5"]
    log = (folder / "worker.log").open("w")
    return subprocess.Popen(
        cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def run(files: int, root: Path) -> dict[str, Any]:
    with LocalPostgres() as pg, local_milvus_lite_server(root / "milvus") as milvus:
        env = settings(pg.create_database("bench"), milvus)
        engine = _engine(env, root / "queue")
        uploads = [JobFile(f"bulletin-{i:03d}", f"bulletin-{i:03d}.md", True, text(i)) for i in range(files)]
        jobs = JobStore(state_for(engine.settings, JOBS))
        start = time.monotonic()
        job = queue_ingest(Collection("crag", engine), uploads, {"source": "bulletins"}, False)
        first, second = worker(root / "machine1", env), None
        try:
            killed_at = _wait(
                jobs, job, lambda r: r.status == "running" and r.progress.get("files_done", 0) >= files // 5
            )
            kill(first)
            done_before = (jobs.get(job) or _missing(job)).progress.get("files_done", 0)
            second = worker(root / "machine2", env)
            _wait(jobs, job, lambda r: r.status in ("done", "failed"), limit=900)
            ended = time.monotonic()
        finally:
            kill(first)
            if second is not None:
                kill(second)
        record = jobs.get(job) or _missing(job)
        base = _engine(env, root / "check").knowledge_base()
        docs, total = base.documents(limit=files + 10)
        stats = base.stats()
        return {
            "files": files,
            "killed_after_s": round(killed_at - start, 1),
            "files_done_at_kill": done_before,
            "job_end_s": round(ended - start, 1),
            "status": record.status,
            "attempts": record.attempts,
            "added": (record.result or {}).get("added"),
            "unchanged (committed before the kill)": (record.result or {}).get("unchanged"),
            "documents": total,
            "distinct_documents": len({d.id for d in docs}),
            "chunks_postgres": stats["chunks"],
            "chunks_milvus": base.vectors.count(),
        }


def _engine(env: dict[str, str], folder: Path) -> CRAG:
    """An engine in ``folder`` with the workers' settings (the ``CRAG_SECTION__KEY`` variables)."""
    sections: dict[str, dict[str, Any]] = {"kb": {"path": str(folder / "kb")}}
    for key, value in env.items():
        section, name = key.removeprefix("CRAG_").lower().split("__")
        sections.setdefault(section, {})[name] = value
    return CRAG.from_config(**sections)


def _wait(jobs: JobStore, job: str, until: Any, limit: float = 600) -> float:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:  # bounded
        record = jobs.get(job)
        if record is not None and until(record):
            return time.monotonic()
        time.sleep(0.2)
    raise SystemExit(f"job {job} did not get there within {limit:.0f} s: {jobs.get(job)}")


def _missing(job: str) -> Any:
    raise SystemExit(f"job {job} disappeared")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="crag-worker-kill-") as tmp:
        figures = run(args.files, Path(tmp))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "worker_kill.json").write_text(json.dumps(figures, indent=2))
    table = Table(title=f"kill -9 of an ingest worker mid-job ({args.files} files)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    Console().print(table)


if __name__ == "__main__":
    main()
