"""Traces and feedback carry ``kb``, so knowledge bases can share one database.

The primary keys become ``(kb, id)`` and ``(kb, trace_id)``: SQLite cannot change a primary
key in place, so each table is rebuilt (created anew, rows copied, old one dropped, new one
renamed), the same statements on both engines. Existing rows get ``kb = ''``, the value of a
SQLite file that belongs to one knowledge base.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "traces_0002"
down_revision: str | None = "traces_0001"
branch_labels = None
depends_on = None

TRACE_COLUMNS = "id, created_at, question, mode, action, confidence, latency_ms, answer, data, status"


def upgrade() -> None:
    op.create_table(
        "traces_new",
        sa.Column("kb", sa.Text, nullable=False, server_default=""),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text),
        sa.Column("question", sa.Text),
        sa.Column("mode", sa.Text),
        sa.Column("action", sa.Text),
        sa.Column("confidence", sa.Float),
        sa.Column("latency_ms", sa.Float),
        sa.Column("answer", sa.Text),
        sa.Column("data", sa.Text),
        sa.Column("status", sa.Text),
        sa.PrimaryKeyConstraint("kb", "id", name="traces_pk"),
    )
    op.execute(f"INSERT INTO traces_new (kb, {TRACE_COLUMNS}) SELECT '', {TRACE_COLUMNS} FROM traces")
    op.drop_table("traces")  # its indexes go with it
    op.rename_table("traces_new", "traces")
    op.create_index("traces_kb_created_at", "traces", ["kb", "created_at"])
    op.create_index("traces_action", "traces", ["action"])
    op.create_index("traces_status", "traces", ["status"])

    op.create_table(
        "feedback_new",
        sa.Column("kb", sa.Text, nullable=False, server_default=""),
        sa.Column("trace_id", sa.Text, nullable=False),
        sa.Column(
            "rating", sa.Text, sa.CheckConstraint("rating IN ('up', 'down')", name="feedback_rating"), nullable=False
        ),
        sa.Column("comment", sa.Text),
        sa.Column("created_at", sa.Text),
        sa.PrimaryKeyConstraint("kb", "trace_id", name="feedback_pk"),
    )
    op.execute(
        "INSERT INTO feedback_new (kb, trace_id, rating, comment, created_at) "
        "SELECT '', trace_id, rating, comment, created_at FROM feedback"
    )
    op.drop_table("feedback")
    op.rename_table("feedback_new", "feedback")
