"""The search and rewrite cache as crag 0.1 wrote it: a new database gets the table, an
older ``search_cache.sqlite`` (which created it on every open) is taken as it is."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "cache_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("cache"):
        return
    op.create_table(
        "cache",
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("namespace", "key"),
    )
