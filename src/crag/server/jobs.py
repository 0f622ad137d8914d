"""Ingest jobs over HTTP: ``POST /v1/ingest`` queues one (with a PostgreSQL ``kb.state_uri``),
``GET /v1/jobs/{id}`` reports it, and ``crag serve --worker`` also runs a worker.

The upload's bytes go into the state database with the job (:mod:`crag.jobs.store`), so a
worker on any machine can ingest them: replicas need no shared upload folder. The route
answers ``202 {"job": id, "status": "queued"}`` at once; the job is read back by id within the
collection it was sent to (a key that may not read that collection gets the same 404 as for an
unknown id).

### Usage example
>>> # curl -F files=@notes.md http://127.0.0.1:8000/v1/ingest        -> 202 {"job": "4f2c…"}
>>> # curl http://127.0.0.1:8000/v1/jobs/4f2c…                       -> {"status": "done", ...}
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Query, Request
from starlette.concurrency import run_in_threadpool

from crag.errors import ApiError, CragError
from crag.server.collections import Collection, Collections, collection_for

if TYPE_CHECKING:
    from crag.jobs.store import JobFile
    from crag.state import StateDB

__all__ = ["WorkerOptions", "install", "queue_ingest", "queues_jobs"]


@dataclass(frozen=True)
class WorkerOptions:
    """A worker inside the server (``crag serve --worker``): its heartbeat and when a job is stalled."""

    heartbeat: float = 10.0
    stalled_after: float = 30.0


def _jobs_db(col: Collection) -> StateDB:
    from crag.jobs.schema import JOBS
    from crag.state import state_for

    return state_for(col.engine.settings, JOBS)


def queues_jobs(col: Collection) -> bool:
    """True when an ingest into ``col`` is queued as a job (its state database is shared)."""
    return bool(col.engine.settings.kb.state_uri)


def queue_ingest(col: Collection, files: Sequence[JobFile], meta: dict[str, Any] | None, clear: bool) -> str:
    """Store the uploaded files with a new job and queue it; return the job's id (blocking: run it in a thread)."""
    from crag.jobs import JobStore, enqueue

    db = _jobs_db(col)
    jobs = JobStore(db)
    job_id = jobs.create(col.name, files, {"metadata": meta, "clear_metadata": clear})
    try:
        jobs.queued(job_id, enqueue(db, job_id))
    except CragError as exc:
        with contextlib.suppress(CragError):
            jobs.fail(job_id, str(exc))
        raise
    return job_id


def install(app: FastAPI, collections: Collections) -> None:
    """Add ``GET /v1/jobs/{id}`` (the worker inside the server: :mod:`crag.server.job_worker`)."""

    @app.get("/v1/jobs/{job_id}")
    async def get_job(request: Request, job_id: str, collection: str | None = Query(None, max_length=64)) -> Any:
        col = collection_for(request, collections, collection)
        missing = ApiError(404, "job_not_found", f"no ingest job {job_id[:40]!r} in collection {col.name!r}")
        if not queues_jobs(col):
            raise missing  # without kb.state_uri an ingest answers at once: there are no jobs
        from crag.jobs import JobStore

        record = await run_in_threadpool(JobStore(_jobs_db(col)).get, job_id)
        if record is None or record.collection != col.name:
            raise missing
        return record.view()
