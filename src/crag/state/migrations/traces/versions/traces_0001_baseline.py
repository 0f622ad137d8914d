"""Traces and feedback as crag 0.1 wrote them (before Alembic).

A new database gets the tables. A ``traces.sqlite`` written before Alembic is taken as it is,
after crag's own migrations it may still lack (``_migrations``: m001 traces, m002 feedback,
m003 status) are done here, so every older file reaches the same baseline.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "traces_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    tables = set(inspector.get_table_names())
    if "traces" not in tables:
        op.create_table(
            "traces",
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("created_at", sa.Text),
            sa.Column("question", sa.Text),
            sa.Column("mode", sa.Text),
            sa.Column("action", sa.Text),
            sa.Column("confidence", sa.Float),
            sa.Column("latency_ms", sa.Float),
            sa.Column("answer", sa.Text),
            sa.Column("data", sa.Text),
            sa.Column("status", sa.Text),
        )
        op.create_index("traces_created_at", "traces", ["created_at"])
        op.create_index("traces_action", "traces", ["action"])
        op.create_index("traces_status", "traces", ["status"])
    elif "status" not in {c["name"] for c in inspector.get_columns("traces")}:
        op.add_column("traces", sa.Column("status", sa.Text))
        op.create_index("traces_status", "traces", ["status"])
        rows = bind.execute(sa.text("SELECT id, data FROM traces")).fetchall()
        for trace_id, data in rows:
            bind.execute(sa.text("UPDATE traces SET status = :s WHERE id = :i"), {"s": _status(data), "i": trace_id})
    if "feedback" not in tables:
        op.create_table(
            "feedback",
            sa.Column("trace_id", sa.Text, primary_key=True),
            sa.Column("rating", sa.Text, sa.CheckConstraint("rating IN ('up', 'down')"), nullable=False),
            sa.Column("comment", sa.Text),
            sa.Column("created_at", sa.Text),
        )


def _status(data: str | None) -> str:
    # How a request ended, as crag 0.1 decided it (frozen here: the live rule may change).
    try:
        trace: Any = json.loads(data or "")
    except ValueError:
        return "failed"
    if not isinstance(trace, dict):
        return "failed"
    if not trace.get("errors") and "answer" not in trace and trace.get("context_only"):
        return "retrieved"
    if not trace.get("errors") and "answer" not in trace and trace.get("cancelled"):
        return "cancelled"
    if trace.get("errors") or "answer" not in trace:
        return "failed"
    if trace.get("abstained"):
        return "abstained"
    if trace.get("refused"):
        return "refused"
    return "degraded" if trace.get("degradations") else "answered"
