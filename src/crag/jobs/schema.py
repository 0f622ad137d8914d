"""The tables of ingest jobs, in the shared state database (``kb.state_uri``).

``ingest_jobs`` holds one row per ``POST /v1/ingest`` that was queued: its status, progress,
result and error, read by ``GET /v1/jobs/{id}`` on any replica. ``ingest_job_files`` holds the
uploaded bytes until the job is done, so a worker on any machine can ingest them without a
shared upload folder. The queue itself (which worker runs what, retries) is procrastinate's
own tables in the same database (:mod:`crag.jobs.queue`).

The group is migrated like the others (:mod:`crag.state.migrate`); it is not in
``crag.state.GROUPS`` because it has no SQLite file: jobs exist only with a PostgreSQL state.

>>> JOBS.head, sorted(t.name for t in JOBS.tables)
('jobs_0001', ['ingest_job_files', 'ingest_jobs'])
"""

from __future__ import annotations

import sqlalchemy as sa

from crag.state.schema import MIGRATIONS, Group

__all__ = ["JOBS", "ingest_job_files", "ingest_jobs", "metadata"]

metadata = sa.MetaData()

ingest_jobs = sa.Table(
    "ingest_jobs",
    metadata,
    sa.Column("kb", sa.Text, nullable=False, server_default=""),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("collection", sa.Text, nullable=False),  # the name the client used, for its scoped key
    sa.Column("status", sa.Text, nullable=False),  # queued | running | done | failed
    sa.Column("created_at", sa.Text, nullable=False),  # ISO 8601, UTC
    sa.Column("started_at", sa.Text),
    sa.Column("finished_at", sa.Text),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),  # >1: a worker died and another took over
    sa.Column("worker", sa.Text),
    sa.Column("queue_id", sa.BigInteger),  # procrastinate's job id
    sa.Column("options", sa.Text, nullable=False),  # JSON: metadata, clear_metadata
    sa.Column("progress", sa.Text, nullable=False),  # JSON: files, files_done, bytes, chunks
    sa.Column("result", sa.Text),  # JSON: the ingest summary, as the synchronous ingest answers it
    sa.Column("error", sa.Text),  # one line, when failed
    sa.PrimaryKeyConstraint("kb", "id", name="ingest_jobs_pk"),
    sa.Index("ingest_jobs_kb_created_at", "kb", "created_at"),
)

ingest_job_files = sa.Table(
    "ingest_job_files",
    metadata,
    sa.Column("kb", sa.Text, nullable=False, server_default=""),
    sa.Column("job", sa.Text, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("document", sa.Text, nullable=False),  # the document id the upload names
    sa.Column("name", sa.Text, nullable=False),  # its safe file name
    sa.Column("own_folder", sa.Boolean, nullable=False),  # crag.server.uploads.Upload.own_folder
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.PrimaryKeyConstraint("kb", "job", "position", name="ingest_job_files_pk"),
)

JOBS = Group("jobs", "jobs.sqlite", "jobs", (ingest_jobs, ingest_job_files), "jobs_0001", MIGRATIONS / "jobs")
