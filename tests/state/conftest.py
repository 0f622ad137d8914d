"""Fixtures of the shared-state tests: a real PostgreSQL server started by the tests.

``pg`` is one server for the whole session (Debian's ``postgresql`` binaries, started on a
free loopback port by :class:`crag.testing.postgres_server.LocalPostgres`); ``pg_url`` is a
fresh database on it for each test, so tests never see each other's rows. A test that stops
the server (``/readyz`` down and up) starts its own with ``LocalPostgres()``. Without the
binaries (``scripts/ci_system_deps.sh`` installs them) or psycopg (``crag[postgres]``) the
tests that use them are skipped; the SQLite tests here run anyway.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator

import pytest

from crag.testing.postgres_server import LocalPostgres, available

_numbers = itertools.count(1)


def need_postgres() -> None:
    """Skip the calling test when PostgreSQL or psycopg is not installed."""
    if not available():
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin); run scripts/ci_system_deps.sh")
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("needs crag[postgres] (psycopg 3)")


@pytest.fixture(scope="session")
def pg() -> Iterator[LocalPostgres]:
    need_postgres()
    with LocalPostgres() as server:
        yield server


@pytest.fixture
def pg_url(pg: LocalPostgres) -> str:
    """The URL of a new, empty database on the session's server."""
    return pg.create_database(f"test_{next(_numbers)}")
