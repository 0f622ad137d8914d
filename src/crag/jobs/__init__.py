"""Ingest jobs that any replica or worker can take (with a PostgreSQL ``kb.state_uri``).

``POST /v1/ingest`` stores the upload and its job in the shared state database and queues it
(procrastinate, :mod:`crag.jobs.queue`); a worker (``crag worker``, or ``crag serve --worker``)
ingests it (:mod:`crag.jobs.tasks`) and records its progress and result
(:mod:`crag.jobs.store`), which ``GET /v1/jobs/{id}`` reports on any replica. Without a
shared state database, ingest stays synchronous.

>>> from crag.jobs import queue_name
>>> queue_name("kb")
'crag-ingest:kb'
"""

from __future__ import annotations

from crag.jobs.queue import enqueue, queue_name
from crag.jobs.schema import JOBS
from crag.jobs.store import JobFile, JobRecord, JobStore

__all__ = ["JOBS", "JobFile", "JobRecord", "JobStore", "enqueue", "queue_name"]
