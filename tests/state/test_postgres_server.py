"""The PostgreSQL fixture itself: a real server, a database per test, stopped and started again."""

from __future__ import annotations

import psycopg
import pytest

from crag.testing.postgres_server import LocalPostgres

pytestmark = pytest.mark.integration


def test_each_test_gets_an_empty_database(pg_url: str) -> None:
    with psycopg.connect(pg_url, connect_timeout=5) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)


def test_server_stops_and_starts_again_with_its_data() -> None:
    with LocalPostgres() as pg:
        url = pg.create_database("kept")
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (42)")
        pg.stop()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=2)
        pg.start()
        with psycopg.connect(url, connect_timeout=5) as conn:
            assert conn.execute("SELECT x FROM t").fetchone() == (42,)
        with pytest.raises(psycopg.OperationalError, match="password"):  # it checks the password
            psycopg.connect(url.replace(pg.password, "wrong"), connect_timeout=5)
    assert not pg.root.exists()
