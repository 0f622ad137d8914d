"""Ingest jobs (one row each, their progress and result) and the uploaded files they carry."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "jobs_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_jobs",
        sa.Column("kb", sa.Text, nullable=False, server_default=""),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("collection", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("started_at", sa.Text),
        sa.Column("finished_at", sa.Text),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("worker", sa.Text),
        sa.Column("queue_id", sa.BigInteger),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("progress", sa.Text, nullable=False),
        sa.Column("result", sa.Text),
        sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("kb", "id", name="ingest_jobs_pk"),
        sa.Index("ingest_jobs_kb_created_at", "kb", "created_at"),
    )
    op.create_table(
        "ingest_job_files",
        sa.Column("kb", sa.Text, nullable=False, server_default=""),
        sa.Column("job", sa.Text, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("own_folder", sa.Boolean, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("kb", "job", "position", name="ingest_job_files_pk"),
    )
