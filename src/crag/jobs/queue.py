"""The ingest queue: procrastinate (PostgreSQL-backed) in the shared state database.

A job is queued on ``crag-ingest:<kb>``, the queue of its knowledge base (``kb.name``, default
the folder's name), with a lock of the same name: procrastinate runs the jobs of one lock one
at a time, in the order they were queued, on whichever worker takes them, so two versions of
one document never cross.

A worker sends procrastinate a heartbeat every ``heartbeat`` seconds. A worker killed in the
middle of a job stops sending it; every worker looks for such *stalled* jobs (no heartbeat
for ``stalled_after`` seconds) of its queues as often as it beats, and puts them back in the
queue, where the next free worker takes them. Re-running a job adds nothing twice: the
ingest skips a file whose content it already holds, and finishes a large file committed in
part (:mod:`crag.ingest.writer`).

procrastinate's tables are created in the database when they are missing (once, under an
advisory lock); upgrading procrastinate past a schema change needs its migrations
(``procrastinate schema --migrations-path``).

>>> queue_name("handbook")
'crag-ingest:handbook'
>>> conninfo("postgresql+psycopg://crag:pw@db:5432/crag")
'postgresql://crag:pw@db:5432/crag'
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from crag.errors import CragError, StateUnavailableError
from crag.state import StateDB

if TYPE_CHECKING:
    import procrastinate

__all__ = ["TASK", "conninfo", "enqueue", "ensure_schema", "queue_name", "retry_stalled", "worker_app"]

log = logging.getLogger("crag.jobs")

TASK = "crag.ingest"
_SCHEMA_LOCK = 0x63726171  # "craq": the advisory lock that creating procrastinate's tables queues on
_ready: set[tuple[int, str]] = set()
_senders: dict[tuple[int, str], procrastinate.App] = {}
_lock = threading.Lock()


def queue_name(kb: str) -> str:
    """The queue (and lock) of knowledge base ``kb``'s ingest jobs."""
    return f"crag-ingest:{kb}"


def conninfo(url: str) -> str:
    """``url`` as libpq takes it (SQLAlchemy's ``+psycopg`` driver suffix dropped)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+')[0]}{sep}{rest}"


def _pool_args(db: StateDB, *, size: int) -> dict[str, Any]:
    return {
        "conninfo": conninfo(db.url),
        "min_size": 1,
        "max_size": size,
        "timeout": db.timeout,  # waiting for a pooled connection
        "kwargs": {"connect_timeout": max(2, math.ceil(db.timeout)), "application_name": "crag-jobs"},
    }


def ensure_schema(db: StateDB) -> None:
    """Create procrastinate's tables in ``db`` unless they are there (once per process)."""
    key = (os.getpid(), db.url)
    if key in _ready:
        return
    from crag.extras import require

    require("procrastinate", "postgres", "ingest jobs (kb.state_uri = postgresql://...)")
    from procrastinate.schema import SchemaManager

    with db.connect(write=True) as conn:
        conn.execute(sa.text("SET LOCAL statement_timeout = 0"))  # the schema is a few hundred statements
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})
        if conn.execute(sa.text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
            # Several statements in one: psycopg sends a query without parameters as it is.
            raw = conn.connection.dbapi_connection
            assert raw is not None
            raw.cursor().execute(SchemaManager.get_schema())
            log.info("created procrastinate's tables in %s", db.display)
    _ready.add(key)


def _sender(db: StateDB) -> procrastinate.App:
    """This process's procrastinate app for queueing jobs (synchronous, opened once)."""
    import procrastinate

    key = (os.getpid(), db.url)
    with _lock:
        app = _senders.get(key)
        if app is None:
            app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(**_pool_args(db, size=4)))
            app.open()
            _senders[key] = app
        return app


def enqueue(db: StateDB, job_id: str) -> int:
    """Queue the ingest job ``job_id`` of knowledge base ``db.scope``; return procrastinate's id.

    Raises :class:`~crag.errors.StateUnavailableError` (one line) when the database does not take it.
    """
    try:
        ensure_schema(db)
        name = queue_name(db.scope)
        return int(_sender(db).configure_task(TASK, queue=name, lock=name).defer(kb=db.scope, job=job_id))
    except CragError:
        raise
    except Exception as exc:  # psycopg's and procrastinate's own errors, from a database that failed us
        raise StateUnavailableError(
            f"could not queue ingest job {job_id} in {db.display}: {' '.join(str(exc).split())[:200]}",
            backend_id="postgres",
            step="jobs",
        ) from exc


def worker_app(db: StateDB, task: Callable[..., None]) -> procrastinate.App:
    """A procrastinate app whose worker runs ``task(context, kb=..., job=...)`` for each job (open it)."""
    import procrastinate

    ensure_schema(db)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(**_pool_args(db, size=4)))
    app.task(name=TASK, pass_context=True)(task)
    return app


async def retry_stalled(app: procrastinate.App, queues: Iterable[str], *, stalled_after: float) -> int:
    """Put the jobs of ``queues`` whose worker sent no heartbeat for ``stalled_after`` seconds
    back in their queue; return how many. Another worker doing the same first is no error."""
    retried = 0
    for queue in queues:
        for job in await app.job_manager.get_stalled_jobs(queue=queue, seconds_since_heartbeat=stalled_after):
            try:
                await app.job_manager.retry_job(job)
            except Exception as exc:  # taken back by another worker in between: it is queued already
                log.debug("stalled job %s not retried here: %s", job.id, exc)
                continue
            log.warning("job %s of queue %s lost its worker; queued again", job.id, queue)
            retried += 1
    return retried


async def watch_stalled(app: procrastinate.App, queues: list[str], *, every: float, stalled_after: float) -> None:
    """Run :func:`retry_stalled` every ``every`` seconds until cancelled (a database error is logged, not fatal)."""
    while True:
        try:
            await retry_stalled(app, queues, stalled_after=stalled_after)
        except Exception as exc:  # the database is away: the next round tries again
            log.warning("looking for stalled ingest jobs failed: %s", " ".join(str(exc).split())[:200])
        await asyncio.sleep(every)
