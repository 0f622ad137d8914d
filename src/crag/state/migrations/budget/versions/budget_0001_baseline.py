"""Per-day budget usage as crag 0.1 wrote it: a new database gets the table, an older
``budget.sqlite`` (which created it on every open) is taken as it is."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "budget_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("budget_usage"):
        return
    op.create_table(
        "budget_usage",
        sa.Column("day", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("used", sa.Integer, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("day", "kind"),
    )
