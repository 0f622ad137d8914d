"""The state tables, defined once for SQLite and PostgreSQL (SQLAlchemy Core).

State comes in **groups**, each a set of tables with its own migration history (an Alembic
script folder under ``crag/state/migrations/<group>``) and its own version table. Without
``kb.state_uri`` each group is one SQLite file beside the knowledge base, as it always was;
with a PostgreSQL ``kb.state_uri`` every group lives in that one database. A group moves or
upgrades on its own.

The ``manifest`` group (documents, chunk texts, generation: :mod:`crag.store.manifest_db`) is
used only in a shared database: without ``kb.state_uri`` the knowledge base keeps its own
``manifest.sqlite`` (:mod:`crag.store.manifest`), as it always did; its SQLite form here
exists so the schema tests can check both engines agree.

Every row carries ``kb``: the knowledge base it belongs to in a shared database
(``kb.name``, default the folder's name). In a SQLite file, which belongs to one knowledge
base, it is ``""``.

The migrations hold their own copies of these definitions (a migration must not change when
this file does); ``tests/state/test_schema.py`` checks that migrating an empty database of
either engine yields exactly these tables, and that ``Group.head`` is each folder's newest
revision.

>>> [g.name for g in GROUPS.values()], GROUPS["traces"].file
(['traces', 'budget', 'cache', 'manifest'], 'traces.sqlite')
>>> sorted(t.name for t in GROUPS["traces"].tables)
['feedback', 'traces']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

__all__ = [
    "BUDGET",
    "CACHE",
    "GROUPS",
    "MANIFEST",
    "TRACES",
    "Group",
    "JSONDoc",
    "budget_usage",
    "cache",
    "feedback",
    "kb_chunks",
    "kb_documents",
    "kb_files",
    "kb_meta",
    "metadata",
    "traces",
]

metadata = sa.MetaData()


def _kb() -> sa.Column[str]:
    return sa.Column("kb", sa.Text, nullable=False, server_default="")


# -- traces: one row per question, its rating beside it ------------------------------------
traces = sa.Table(
    "traces",
    metadata,
    _kb(),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("created_at", sa.Text),
    sa.Column("question", sa.Text),
    sa.Column("mode", sa.Text),
    sa.Column("action", sa.Text),
    sa.Column("confidence", sa.Float),
    sa.Column("latency_ms", sa.Float),
    sa.Column("answer", sa.Text),
    sa.Column("data", sa.Text),  # the whole trace as JSON (redacted)
    sa.Column("status", sa.Text),
    sa.PrimaryKeyConstraint("kb", "id", name="traces_pk"),
    sa.Index("traces_kb_created_at", "kb", "created_at"),
    sa.Index("traces_action", "action"),
    sa.Index("traces_status", "status"),
)

feedback = sa.Table(
    "feedback",
    metadata,
    _kb(),
    sa.Column("trace_id", sa.Text, nullable=False),  # one rating per trace: the latest wins
    sa.Column(
        "rating", sa.Text, sa.CheckConstraint("rating IN ('up', 'down')", name="feedback_rating"), nullable=False
    ),
    sa.Column("comment", sa.Text),
    sa.Column("created_at", sa.Text),
    sa.PrimaryKeyConstraint("kb", "trace_id", name="feedback_pk"),
)

# -- budgets: what each UTC day has spent -----------------------------------------------------
budget_usage = sa.Table(
    "budget_usage",
    metadata,
    _kb(),
    sa.Column("day", sa.Text, nullable=False),  # UTC, YYYY-MM-DD
    sa.Column("kind", sa.Text, nullable=False),  # "tokens" | "searches"
    sa.Column("used", sa.BigInteger, nullable=False, server_default="0"),  # tokens: a big day passes 2^31
    sa.PrimaryKeyConstraint("kb", "day", "kind", name="budget_usage_pk"),
)

# -- caches of the correction step: search results and rewrites -------------------------------
cache = sa.Table(
    "cache",
    metadata,
    _kb(),
    sa.Column("namespace", sa.Text, nullable=False),  # "search:<provider>" | "rewrite:<kind>"
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("value", sa.Text, nullable=False),  # JSON
    sa.Column("created", sa.Float, nullable=False),  # Unix time
    sa.PrimaryKeyConstraint("kb", "namespace", "key", name="cache_pk"),
    sa.Index("cache_created", "created"),
)


# -- the manifest of a knowledge base in a shared database: its documents and chunk texts ------
class JSONDoc(sa.types.TypeDecorator[Any]):
    """JSON: ``jsonb`` on PostgreSQL (a filter reads a key with ``->>`` in one flat query),
    SQLite's ``JSON`` text elsewhere. The PostgreSQL type is imported only when used."""

    impl = sa.JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


kb_meta = sa.Table(  # "generation", "embedder", "dirty", "created", ... (crag.store.manifest's meta)
    "kb_meta",
    metadata,
    _kb(),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("value", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("kb", "key", name="kb_meta_pk"),
)

kb_files = sa.Table(  # one row per ingested file; sha256 "partial:<sha>" while a big file commits
    "kb_files",
    metadata,
    _kb(),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("sha256", sa.Text, nullable=False),
    sa.Column("n_chunks", sa.Integer, nullable=False),
    sa.Column("ingested_at", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("kb", "path", name="kb_files_pk"),
)

kb_chunks = sa.Table(
    "kb_chunks",
    metadata,
    _kb(),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("file", sa.Text, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),  # position in its file
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("metadata", JSONDoc, nullable=False),
    sa.PrimaryKeyConstraint("kb", "id", name="kb_chunks_pk"),
    sa.Index("kb_chunks_file", "kb", "file", "seq"),
)

kb_documents = sa.Table(  # crag.store.documents: what a user adds, replaces and removes
    "kb_documents",
    metadata,
    _kb(),
    sa.Column("file", sa.Text, nullable=False),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("metadata", JSONDoc, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("kb", "file", name="kb_documents_pk"),
    sa.UniqueConstraint("kb", "id", name="kb_documents_id"),
)


MIGRATIONS = Path(__file__).parent / "migrations"


@dataclass(frozen=True)
class Group:
    """Tables that migrate together: their SQLite file, migration folder and newest revision."""

    name: str
    file: str  # the SQLite file beside the knowledge base
    label: str  # what it holds, for messages: "trace database kb/traces.sqlite is corrupt"
    tables: tuple[sa.Table, ...]
    head: str  # the newest revision in <location>/versions (checked by the tests)
    location: Path  # the Alembic script folder
    # SQLite: keep connections open between uses (a cache read is then ~0.05 ms, not a file
    # open), or open one per use, so a file damaged or replaced under a long-running server is
    # seen at the next use (the WAL of a kept connection would hide it) and recovered.
    keep_open: bool = False

    @property
    def version_table(self) -> str:
        """The table holding the group's applied revision (one per group, so each upgrades on its own)."""
        return f"crag_{self.name}_version"


TRACES = Group("traces", "traces.sqlite", "trace", (traces, feedback), "traces_0002", MIGRATIONS / "traces")
BUDGET = Group("budget", "budget.sqlite", "budget", (budget_usage,), "budget_0002", MIGRATIONS / "budget")
CACHE = Group("cache", "search_cache.sqlite", "search cache", (cache,), "cache_0002", MIGRATIONS / "cache", True)
MANIFEST = Group(  # shared databases only (see the module docstring)
    "manifest",
    "manifest_state.sqlite",
    "manifest",
    (kb_meta, kb_files, kb_chunks, kb_documents),
    "manifest_0001",
    MIGRATIONS / "manifest",
)
GROUPS = {g.name: g for g in (TRACES, BUDGET, CACHE, MANIFEST)}
