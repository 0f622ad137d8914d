"""An ingest worker inside ``crag serve`` (``--worker``): it runs for the app's lifetime.

Kept apart from :mod:`crag.server.jobs` because the worker imports the upload helpers
(:mod:`crag.server.uploads`), which import the routes' queueing.

### Usage example
>>> app = create_app(collections, worker=WorkerOptions())   # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from crag.errors import CragError
from crag.server.collections import Collections
from crag.server.jobs import WorkerOptions

__all__ = ["run_worker_with"]

log = logging.getLogger("crag.server")


def run_worker_with(app: FastAPI, collections: Collections, options: WorkerOptions) -> None:
    """Run an ingest worker (:func:`crag.jobs.tasks.run_worker`) for the app's lifetime."""
    from crag.jobs.tasks import engines_by_kb, run_worker

    previous = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with previous(a) as state:
            engines = engines_by_kb([c.engine for c in collections])
            task = asyncio.create_task(
                run_worker(
                    engines,
                    heartbeat=options.heartbeat,
                    stalled_after=options.stalled_after,
                    install_signal_handlers=False,  # uvicorn owns the signals
                )
            )
            task.add_done_callback(_log_end)
            try:
                yield state
            finally:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, timeout=10)

    app.router.lifespan_context = lifespan


def _log_end(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("the ingest worker stopped: %s", exc if isinstance(exc, CragError) else repr(exc))
