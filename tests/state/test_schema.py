"""One schema for both engines: migrating an empty SQLite file or PostgreSQL database builds
exactly the tables of :mod:`crag.state.schema`, and each group's head is its newest revision."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from crag.state import GROUPS, Group, StateDB

pytestmark = pytest.mark.integration


def schema_diff(db: StateDB) -> list[object]:
    """What the database's tables of ``db.group`` lack or have beyond the schema (Alembic's autogenerate)."""
    wanted = sa.MetaData()
    for table in db.group.tables:
        table.to_metadata(wanted)
    names = {t.name for t in db.group.tables}

    def mine(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
        return type_ != "table" or name in names  # other groups' tables share a PostgreSQL database

    with db.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": mine, "compare_type": True})
        return list(compare_metadata(context, wanted))


@pytest.mark.parametrize("group", GROUPS.values(), ids=GROUPS.keys())
def test_head_is_the_newest_revision(group: Group) -> None:
    script = ScriptDirectory(str(group.location))
    assert script.get_current_head() == group.head
    assert len(list(script.walk_revisions())) == int(group.head.rsplit("_", 1)[1])  # no gaps, one line


@pytest.mark.parametrize("group", GROUPS.values(), ids=GROUPS.keys())
def test_sqlite_migrations_build_the_schema(group: Group, tmp_path: Path) -> None:
    db = StateDB.sqlite(tmp_path / group.file, group)
    assert schema_diff(db) == []
    assert db.applied == [f"{group.name}_000{i}" for i in range(1, int(group.head[-1]) + 1)]


def test_postgres_migrations_build_the_schema(pg_url: str) -> None:
    for group in GROUPS.values():  # every group in the one database, each with its version table
        db = StateDB(pg_url, group, scope="kb")
        assert schema_diff(db) == [], group.name
        assert db.applied[-1] == group.head
    with StateDB(pg_url, GROUPS["traces"]).connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
    assert tables == {t.name for g in GROUPS.values() for t in g.tables} | {g.version_table for g in GROUPS.values()}


def test_concurrent_first_use_migrates_once(pg_url: str) -> None:
    # Replicas starting together: each process migrates under the advisory lock, once.
    import subprocess
    import sys

    code = (
        "import sys; from crag.state import StateDB, TRACES; db = StateDB(sys.argv[1], TRACES, scope='kb'); "
        "db.ping(); print(len(db.applied))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, pg_url], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    counts = sorted(int((p.communicate(timeout=120)[0] or "-1").strip()) for p in procs)
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert counts == [0, 0, 2]  # one applied both revisions; the others found them done
