"""The manifest of knowledge bases in a shared database: meta, files, chunks and documents,
every row keyed by its knowledge base's name (``kb``). The same columns as ``manifest.sqlite``
(:mod:`crag.store.manifest`), with metadata as ``jsonb`` on PostgreSQL."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "manifest_0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def _json() -> Any:
    if op.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        return JSONB()
    return sa.JSON()


def _kb() -> sa.Column[str]:
    return sa.Column("kb", sa.Text, nullable=False, server_default="")


def upgrade() -> None:
    op.create_table(
        "kb_meta",
        _kb(),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("kb", "key", name="kb_meta_pk"),
    )
    op.create_table(
        "kb_files",
        _kb(),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("n_chunks", sa.Integer, nullable=False),
        sa.Column("ingested_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("kb", "path", name="kb_files_pk"),
    )
    op.create_table(
        "kb_chunks",
        _kb(),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("file", sa.Text, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("metadata", _json(), nullable=False),
        sa.PrimaryKeyConstraint("kb", "id", name="kb_chunks_pk"),
    )
    op.create_index("kb_chunks_file", "kb_chunks", ["kb", "file", "seq"])
    op.create_table(
        "kb_documents",
        _kb(),
        sa.Column("file", sa.Text, nullable=False),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("metadata", _json(), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("kb", "file", name="kb_documents_pk"),
        sa.UniqueConstraint("kb", "id", name="kb_documents_id"),
    )
