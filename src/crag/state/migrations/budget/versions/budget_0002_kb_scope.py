"""Budget usage carries ``kb``: the primary key becomes ``(kb, day, kind)``, the table is
rebuilt (SQLite cannot change a primary key in place) and existing rows get ``kb = ''``;
``used`` becomes a 64-bit integer (PostgreSQL's ``integer`` stops at 2^31 tokens a day)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "budget_0002"
down_revision: str | None = "budget_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "budget_usage_new",
        sa.Column("kb", sa.Text, nullable=False, server_default=""),
        sa.Column("day", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("used", sa.BigInteger, nullable=False, server_default="0"),  # a big day passes 2^31 tokens
        sa.PrimaryKeyConstraint("kb", "day", "kind", name="budget_usage_pk"),
    )
    op.execute("INSERT INTO budget_usage_new (kb, day, kind, used) SELECT '', day, kind, used FROM budget_usage")
    op.drop_table("budget_usage")
    op.rename_table("budget_usage_new", "budget_usage")
