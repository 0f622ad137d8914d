"""The ingest task a worker runs, and the worker loop (``crag worker``, ``crag serve --worker``).

A job's files come out of the state database (:mod:`crag.jobs.store`), are written to the
worker's own upload folder (``<kb>/uploads``, as a synchronous upload is) and ingested there;
the job row follows the ingest file by file and ends with the same summary the synchronous
``POST /v1/ingest`` answers. A job that is run again (its worker died) writes the same bytes
to the same paths, so the ingest finds what the first run committed and adds nothing twice.

### Usage example
>>> asyncio.run(run_worker({"kb": engine}, heartbeat=2, stalled_after=10))   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crag.engine import CRAG
from crag.errors import ConfigError, CragError, StateUnavailableError
from crag.jobs.queue import queue_name, watch_stalled, worker_app
from crag.jobs.schema import JOBS
from crag.jobs.store import JobStore
from crag.state import kb_name, state_for

__all__ = ["IngestRunner", "engines_by_kb", "run_worker"]

log = logging.getLogger("crag.jobs")

PROGRESS_EVERY = 0.5  # seconds between two saves of a running job's progress


def engines_by_kb(engines: Mapping[str, CRAG] | list[CRAG]) -> dict[str, CRAG]:
    """The engines by their knowledge base's name in the state database (their queue's name)."""
    values = list(engines.values()) if isinstance(engines, Mapping) else list(engines)
    return {kb_name(e.settings): e for e in values}


class IngestRunner:
    """Runs ingest jobs of the knowledge bases ``engines`` (by :func:`crag.state.kb_name`)."""

    def __init__(self, engines: Mapping[str, CRAG], *, name: str = "") -> None:
        self.engines = dict(engines)
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, context: Any, kb: str, job: str) -> None:
        """procrastinate's task: ingest job ``job`` of knowledge base ``kb``."""
        engine = self.engines.get(kb)
        if engine is None:  # a worker listens only to its own knowledge bases' queues
            raise ConfigError(f"ingest job {job} is for knowledge base {kb!r}, which this worker does not hold")
        self.run(engine, job)

    def run(self, engine: CRAG, job: str) -> None:
        """Ingest job ``job`` into ``engine``'s knowledge base and record how it went."""
        from crag.server.uploads import Upload, ingest_summary, store, tidy

        jobs = JobStore(state_for(engine.settings, JOBS))
        record = jobs.get(job)
        if record is None or record.status in ("done", "failed"):
            return  # finished by a worker that died before telling the queue: nothing to redo
        jobs.start(job, self.name)
        files = jobs.files(job)
        progress: dict[str, Any] = {**record.progress, "files_done": 0, "chunks": 0}
        tracker = _Tracker(jobs, job, progress)
        uploads = Path(engine.settings.kb.path) / "uploads"
        options = record.options
        try:
            names = store(uploads, [Upload(f.document, f.name, f.data, f.own_folder) for f in files])
            report = engine.ingest(
                list(names),
                metadata=options.get("metadata"),
                clear_metadata=bool(options.get("clear_metadata")),
                names=names,
                progress=tracker,
            )
            tidy(names, engine.knowledge_base().manifest)
            summary = _named(ingest_summary(report, uploads), names, uploads)
        except CragError as exc:
            log.warning("ingest job %s failed: %s", job, exc)
            jobs.fail(job, str(exc))
            return
        except Exception:
            log.exception("ingest job %s failed", job)
            jobs.fail(job, "internal error; see the worker's log")
            raise
        # The chunks the job's documents hold now, whichever run wrote them (a run after a killed
        # worker finds some "unchanged"); the result's chunks_written counts this run's writes.
        held = sum(f["chunks"] for f in summary["files"] if f["status"] in ("added", "updated", "unchanged"))
        progress.update(files_done=len(files), chunks=held)
        jobs.finish(job, progress, summary)
        log.info("ingest job %s done: %d files, %d chunks", job, len(files), held)


def _named(summary: dict[str, Any], names: Mapping[str, Any], uploads: Path) -> dict[str, Any]:
    """The summary with each file's document id, skipped files included (the ingest names only
    the documents it stored): a client reads why its upload ``bin.txt`` was skipped by its id."""
    root = uploads.resolve().parent
    ids = {str(Path(path).relative_to(root)): name.id for path, name in names.items()}
    for f in summary["files"]:
        f["id"] = f["id"] or ids.get(f["path"], "")
    return summary


class _Tracker:
    """The ingest's progress callback: saves files done and bytes, at most every ``PROGRESS_EVERY`` s."""

    def __init__(self, jobs: JobStore, job: str, progress: dict[str, Any]) -> None:
        self.jobs, self.job, self.progress = jobs, job, progress
        self.seen: list[str] = []
        self.saved = 0.0

    def __call__(self, done: int, total: int, file: str) -> None:
        if file and file not in self.seen:
            self.seen.append(file)
        self.progress.update(files_done=max(0, len(self.seen) - 1), bytes_done=done, bytes_total=total)
        now = time.monotonic()
        if now - self.saved >= PROGRESS_EVERY:
            self.saved = now
            try:
                self.jobs.advance(self.job, self.progress)
            except CragError as exc:  # progress is a courtesy: the ingest goes on
                log.debug("progress of job %s not saved: %s", self.job, exc)


async def run_worker(
    engines: Mapping[str, CRAG],
    *,
    heartbeat: float = 10.0,
    stalled_after: float = 30.0,
    install_signal_handlers: bool = True,
    name: str = "",
) -> None:
    """Take ingest jobs of ``engines``' knowledge bases (by :func:`crag.state.kb_name`) until stopped.

    Every ``heartbeat`` seconds the worker tells the database it lives, and queues again the
    jobs of workers silent for ``stalled_after`` seconds (:mod:`crag.jobs.queue`).
    """
    if not engines:
        raise ConfigError("a worker needs at least one knowledge base; give --kb")
    if stalled_after <= 2 * heartbeat:
        raise ConfigError(
            f"--stalled-after {stalled_after:g} must be more than twice --heartbeat {heartbeat:g}, "
            "or a slow but living worker's job would be run twice"
        )
    dbs = {kb: state_for(e.settings, JOBS) for kb, e in engines.items()}
    urls = {db.url for db in dbs.values()}
    if not all(db.shared for db in dbs.values()):
        raise ConfigError("ingest jobs need a shared state database: set kb.state_uri = postgresql://user@host:5432/db")
    if len(urls) > 1:
        raise ConfigError("a worker takes jobs from one state database; give its knowledge bases one kb.state_uri")
    runner = IngestRunner(engines, name=name)
    db = next(iter(dbs.values()))
    app = worker_app(db, runner)
    queues = [queue_name(kb) for kb in engines]
    try:
        await _work(app, runner, queues, heartbeat, stalled_after, install_signal_handlers)
    except CragError:
        raise
    except Exception as exc:
        from procrastinate.exceptions import ProcrastinateException
        from psycopg import Error as PsycopgError

        if not isinstance(exc, (ProcrastinateException, PsycopgError)):
            raise
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise StateUnavailableError(
            f"the ingest worker lost its state database {db.display}: {reason}; it is safe to start it again "
            "(its job is taken over)",
            backend_id="postgres",
            step="jobs",
        ) from exc


async def _work(
    app: Any, runner: IngestRunner, queues: list[str], heartbeat: float, stalled_after: float, signals: bool
) -> None:
    async with app.open_async():
        watcher = asyncio.create_task(watch_stalled(app, queues, every=heartbeat, stalled_after=stalled_after))
        try:
            await app.run_worker_async(
                queues=queues,
                concurrency=1,  # an ingest is blocking work, and one knowledge base takes one at a time anyway
                name=runner.name,
                update_heartbeat_interval=heartbeat,
                stalled_worker_timeout=stalled_after,
                fetch_job_polling_interval=min(5.0, heartbeat),
                install_signal_handlers=signals,
            )
        finally:
            watcher.cancel()
