"""Versioned migrations of the state tables, run by Alembic inside the caller's transaction.

Each group (:mod:`crag.state.schema`) has an Alembic script folder,
``crag/state/migrations/<group>/versions``, one file per revision, and records its revision in
its own version table. :class:`crag.state.db.StateDB` calls :func:`upgrade` the first time a
process uses a group whose recorded revision is not the newest, inside a transaction that
holds the database's write lock (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on
PostgreSQL), so two processes starting together upgrade once, and a failing revision leaves
nothing half done.

The first revision of each group takes a file written before Alembic (crag's own
``_migrations`` table, or none) as it is, so an existing knowledge base upgrades in place.

Adding a revision: copy the newest file in the group's ``versions`` folder, set ``revision``
(``<group>_<NNNN>``) and ``down_revision``, write ``upgrade()`` with its own table definitions
(never import :mod:`crag.state.schema`: a migration must not change when the schema does),
update the schema and ``Group.head``; ``tests/state/test_schema.py`` checks that both engines
then agree with the schema.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import sqlalchemy as sa

from crag.state.schema import Group

__all__ = ["current_revision", "run_env", "upgrade"]


def current_revision(connection: sa.Connection, group: Group) -> str | None:
    """The revision ``group`` is at in this database (None: never migrated by Alembic)."""
    if not sa.inspect(connection).has_table(group.version_table):
        return None
    row = connection.execute(sa.text(f"SELECT version_num FROM {group.version_table}")).first()
    return None if row is None else str(row[0])


def upgrade(connection: sa.Connection, group: Group) -> list[str]:
    """Bring ``group`` to its newest revision inside ``connection``'s open transaction.

    Returns the revisions applied, oldest first.
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(group.location))
    applied: list[str] = []
    cfg.attributes.update(connection=connection, group=group, applied=applied)
    command.upgrade(cfg, "head")
    return applied


def run_env() -> None:
    """The body of every group's ``env.py``: migrate the connection :func:`upgrade` handed over."""
    from alembic import context
    from alembic.migration import MigrationContext, MigrationInfo

    try:
        cfg = context.config
    except (AttributeError, NameError):  # imported outside Alembic (pytest's doctest collection): nothing to run
        return
    group: Group = cfg.attributes["group"]
    applied: list[str] = cfg.attributes["applied"]

    def record(ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]) -> None:
        applied.append(str(step.up_revision_id))

    context.configure(
        connection=cfg.attributes["connection"],
        version_table=group.version_table,
        transactional_ddl=True,  # SQLite too: the caller's transaction holds every statement
        on_version_apply=record,
    )
    with context.begin_transaction():
        context.run_migrations()
