"""The rows of ingest jobs: created by the server, advanced by a worker, read by any replica.

Every write is one short transaction, so a worker killed at any point leaves the row as
it was at its last step: ``running`` with its last progress until another worker takes the
job over (:mod:`crag.jobs.queue`), which counts one more attempt.

### Usage example
>>> jobs = JobStore(state_for(settings, JOBS))                       # doctest: +SKIP
>>> job_id = jobs.create("crag", [JobFile("a.md", "a.md", True, b"# A")], {})   # doctest: +SKIP
>>> jobs.get(job_id).status                                          # doctest: +SKIP
'queued'
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from crag.jobs.schema import ingest_job_files, ingest_jobs
from crag.state import StateDB

__all__ = ["STATUSES", "JobFile", "JobRecord", "JobStore"]

STATUSES = ("queued", "running", "done", "failed")


@dataclass(frozen=True)
class JobFile:
    """One uploaded file a job carries: its document id, file name and bytes."""

    document: str
    name: str
    own_folder: bool
    data: bytes


@dataclass(frozen=True)
class JobRecord:
    """One job as ``GET /v1/jobs/{id}`` reports it."""

    id: str
    collection: str
    status: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    attempts: int
    options: dict[str, Any]
    progress: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None

    def view(self) -> dict[str, Any]:
        """The job as the API answers it: status, progress, skipped files with their reasons, error."""
        result = self.result or {}
        skipped = [
            {"id": f.get("id", ""), "path": f.get("path", ""), "reason": f.get("reason", "")}
            for f in result.get("files", [])
            if f.get("status") == "skipped"
        ]
        return {
            "job": self.id,
            "collection": self.collection,
            "status": self.status,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "attempts": self.attempts,
            "progress": self.progress,
            "skipped": skipped,
            "warnings": list(result.get("warnings", [])),
            "error": self.error,
            "result": self.result,
        }


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


class JobStore:
    """Ingest jobs of one knowledge base (``db.scope``) in the state database ``db``."""

    def __init__(self, db: StateDB) -> None:
        self.db = db

    def create(self, collection: str, files: Sequence[JobFile], options: dict[str, Any]) -> str:
        """Store a new ``queued`` job and its files, in one transaction; return its id."""
        job_id = secrets.token_hex(8)
        kb = self.db.scope
        progress = {"files": len(files), "files_done": 0, "bytes": sum(len(f.data) for f in files), "chunks": 0}
        with self.db.connect(write=True) as conn:
            conn.execute(
                ingest_jobs.insert().values(
                    kb=kb,
                    id=job_id,
                    collection=collection,
                    status="queued",
                    created_at=_now(),
                    options=json.dumps(options, ensure_ascii=False),
                    progress=json.dumps(progress),
                )
            )
            conn.execute(
                ingest_job_files.insert(),
                [
                    {"kb": kb, "job": job_id, "position": i, "document": f.document, "name": f.name}
                    | {"own_folder": f.own_folder, "data": f.data}
                    for i, f in enumerate(files)
                ],
            )
        return job_id

    def get(self, job_id: str) -> JobRecord | None:
        """The job, or None when this knowledge base has none of that id."""
        with self.db.connect() as conn:
            row = conn.execute(sa.select(ingest_jobs).where(self._job(job_id))).first()
        if row is None:
            return None
        return JobRecord(
            id=row.id,
            collection=row.collection,
            status=row.status,
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            attempts=row.attempts,
            options=json.loads(row.options),
            progress=json.loads(row.progress),
            result=json.loads(row.result) if row.result else None,
            error=row.error,
        )

    def files(self, job_id: str) -> list[JobFile]:
        """The files the job carries, in upload order (none once it has finished)."""
        t = ingest_job_files
        with self.db.connect() as conn:
            rows = conn.execute(
                sa.select(t.c.document, t.c.name, t.c.own_folder, t.c.data)
                .where(t.c.kb == self.db.scope, t.c.job == job_id)
                .order_by(t.c.position)
            ).all()
        return [JobFile(r.document, r.name, bool(r.own_folder), bytes(r.data)) for r in rows]

    def queued(self, job_id: str, queue_id: int) -> None:
        """Record procrastinate's id of the job."""
        self._update(job_id, queue_id=queue_id)

    def start(self, job_id: str, worker: str) -> None:
        """A worker takes the job (again, after one died: one more attempt)."""
        with self.db.connect(write=True) as conn:
            conn.execute(
                ingest_jobs.update()
                .where(self._job(job_id))
                .values(status="running", worker=worker, started_at=_now(), attempts=ingest_jobs.c.attempts + 1)
            )

    def advance(self, job_id: str, progress: dict[str, Any]) -> None:
        """Save the job's progress so far."""
        self._update(job_id, progress=json.dumps(progress))

    def finish(self, job_id: str, progress: dict[str, Any], result: dict[str, Any]) -> None:
        """The job is done: its result is saved and its uploaded bytes are dropped, together."""
        self._end(job_id, status="done", progress=json.dumps(progress), result=json.dumps(result, ensure_ascii=False))

    def fail(self, job_id: str, error: str) -> None:
        """The job failed for good: ``error`` (one line) says why; its uploaded bytes are dropped."""
        self._end(job_id, status="failed", error=error)

    def _end(self, job_id: str, **values: Any) -> None:
        with self.db.connect(write=True) as conn:
            conn.execute(ingest_jobs.update().where(self._job(job_id)).values(finished_at=_now(), **values))
            t = ingest_job_files
            conn.execute(t.delete().where(t.c.kb == self.db.scope, t.c.job == job_id))

    def _update(self, job_id: str, **values: Any) -> None:
        with self.db.connect(write=True) as conn:
            conn.execute(ingest_jobs.update().where(self._job(job_id)).values(**values))

    def _job(self, job_id: str) -> sa.ColumnElement[bool]:
        return sa.and_(ingest_jobs.c.kb == self.db.scope, ingest_jobs.c.id == job_id)
