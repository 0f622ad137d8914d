"""Cache entries carry ``kb``: the primary key becomes ``(kb, namespace, key)``, the table is
rebuilt (SQLite cannot change a primary key in place) with an index on ``created`` for the
purge of expired entries; existing entries get ``kb = ''``."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "cache_0002"
down_revision: str | None = "cache_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cache_new",
        sa.Column("kb", sa.Text, nullable=False, server_default=""),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("kb", "namespace", "key", name="cache_pk"),
    )
    op.execute(
        "INSERT INTO cache_new (kb, namespace, key, value, created) "
        "SELECT '', namespace, key, value, created FROM cache"
    )
    op.drop_table("cache")
    op.rename_table("cache_new", "cache")
    op.create_index("cache_created", "cache", ["created"])
