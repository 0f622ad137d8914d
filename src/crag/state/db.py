"""One home for state connections: a group's SQLite file, or a shared PostgreSQL database.

:class:`StateDB` is what the trace store, the budget and the caches hold instead of a file
path. It is cheap to build (nothing connects), opens its SQLAlchemy engine on first use,
then migrates the group once per process (:mod:`crag.state.migrate`), and hands out
connections inside a transaction:

* SQLite: a connection per use, or a small pool kept open for the caches
  (``Group.keep_open``; closed when the file is moved aside or deleted, :meth:`StateDB.reset`),
  WAL, a 30 s busy timeout, and ``BEGIN IMMEDIATE`` for writes, so two processes never both
  pass a check-then-write.
* PostgreSQL (psycopg 3): a pool per process checked before each use, a connect timeout and
  a statement timeout (``kb.state_timeout``), TCP keepalives. A database that cannot be
  reached raises :class:`~crag.errors.StateUnavailableError` (one line, no password) within
  the timeout: the server answers 503, never hangs.

### Usage example
>>> import tempfile, pathlib
>>> from crag.state.schema import BUDGET, budget_usage
>>> db = StateDB.sqlite(pathlib.Path(tempfile.mkdtemp()) / "budget.sqlite", BUDGET)
>>> with db.connect(write=True) as conn:
...     _ = conn.execute(db.insert(budget_usage).values(kb=db.scope, day="2025-01-01", kind="tokens", used=7))
>>> with db.connect() as conn:
...     conn.execute(sa.select(budget_usage.c.used)).scalar_one()
7
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool, QueuePool

from crag._sqlite import set_wal
from crag.config_state import STATE_SCHEMES
from crag.errors import KnowledgeBaseError, StateUnavailableError
from crag.paths import make_folder
from crag.state.migrate import current_revision, upgrade
from crag.state.schema import Group

__all__ = ["StateDB"]

_MIGRATION_LOCK = 0x63726167  # "crag": the advisory lock concurrent upgrades of one database queue on
_engines: dict[tuple[int, str], sa.Engine] = {}
_migrated: set[tuple[int, str, str, str]] = set()  # groups this process has migrated (or found current)
_lock = threading.Lock()


class StateDB:
    """The tables of one state ``group``: in the SQLite file ``target`` (a path), or in the
    PostgreSQL database ``target`` (a ``postgresql://`` URL).

    ``scope`` is the value of the ``kb`` column this knowledge base reads and writes: ``""`` in
    its own SQLite file, its name in a shared database. ``timeout`` bounds connecting and each
    statement on PostgreSQL.
    """

    def __init__(self, target: str | Path, group: Group, *, scope: str = "", timeout: float = 5.0) -> None:
        self.group = group
        self.scope = scope
        self.timeout = timeout
        self.path: Path | None = None
        if isinstance(target, Path):
            self.path = target
            self.url = f"sqlite:///{target}"  # identity only: the file is opened by path
            self.display = str(target)
        else:
            scheme = target.partition("://")[0].lower() if "://" in target else ""
            if scheme not in STATE_SCHEMES:
                raise ValueError(f"not a PostgreSQL URL: {scheme or target[:20]}://...")
            self.url = target
            self.display = make_url(target).render_as_string(hide_password=True)  # for errors and logs
        self.dialect = "sqlite" if self.path is not None else "postgresql"
        self.applied: list[str] = []  # revisions this object applied (the first user of the group in a process)
        self.read_only = False  # a SQLite file on a full disk: reads as it is, writes wait for space

    @classmethod
    def sqlite(cls, path: str | Path, group: Group) -> StateDB:
        """The group in its own SQLite file at ``path`` (created, with its folder, on first use)."""
        return cls(Path(path), group)

    @classmethod
    def for_kb(cls, state_uri: str, group: Group, *, sqlite_path: Path, name: str, timeout: float = 5.0) -> StateDB:
        """The group of knowledge base ``name``: at ``state_uri`` when it is set, else in ``sqlite_path``."""
        uri = state_uri.strip()
        if not uri:
            return cls(Path(sqlite_path), group)
        return cls(uri, group, scope=name, timeout=timeout)

    @property
    def shared(self) -> bool:
        """True for a database several processes on several machines may share (PostgreSQL)."""
        return self.dialect == "postgresql"

    def exists(self) -> bool:
        """False for a SQLite file not created yet (reading it would create it)."""
        return self.path is None or self.path.is_file()

    # -- connections ----------------------------------------------------------------------
    @contextmanager
    def connect(self, *, write: bool = False) -> Iterator[sa.Connection]:
        """A connection inside a transaction, committed when the block ends (rolled back on error).

        ``write`` takes SQLite's write lock at once, so a read-check-write inside the block is
        atomic across processes. Driver errors come out as crag errors naming the database.
        """
        if self.read_only:
            if not write:
                with self._read_only() as conn:
                    yield conn
                return
            self._writable()
        try:
            engine = self._ready()
            with engine.connect() as conn:
                if write:
                    conn = conn.execution_options(crag_write=True)
                with conn.begin():
                    yield conn
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise self.error(exc) from exc

    @contextmanager
    def session(self) -> Iterator[sa.Connection]:
        """A connection of its own outside any transaction (autocommit), for what a database
        session holds across statements: the knowledge base's advisory write lock
        (:mod:`crag.store.writelock_db`). Closing it returns it to the pool."""
        try:
            engine = self._ready()
            with engine.connect() as conn:
                yield conn.execution_options(isolation_level="AUTOCOMMIT")
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise self.error(exc) from exc

    def open_read_only(self) -> None:
        """Read this SQLite file without writing a byte (its disk is full): reads see what is
        saved, and a write first tries to open it for writing again (:meth:`connect`)."""
        if self.path is not None:
            self.read_only = True

    def _writable(self) -> None:
        """Before a write on a read-only file: open it for writing, or say the disk is still full."""
        from crag.paths import disk_full_error, is_disk_full

        assert self.path is not None
        try:
            try:
                self._ready()
            except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
                raise self.error(exc) from exc
        except KnowledgeBaseError as exc:
            if not is_disk_full(self.path.parent, exc):
                raise
            what = f"the {self.group.label} database is open for reading only"
            raise disk_full_error(self.path.parent, what, "free space to write it again") from None
        self.read_only = False

    @contextmanager
    def _read_only(self) -> Iterator[sa.Connection]:
        """A connection that writes nothing: the file as it is (SQLite's ``immutable`` when no
        write-ahead log holds commits the file lacks), or an empty in-memory copy of the group's
        tables when there is no file yet."""
        assert self.path is not None
        path = self.path
        wal = Path(f"{path}-wal")
        mode = "mode=ro" if wal.exists() and wal.stat().st_size > 0 else "mode=ro&immutable=1"
        engine = None
        if path.exists() and path.stat().st_size > 0:
            uri = f"{path.resolve().as_uri()}?{mode}"
            engine = sa.create_engine(
                "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False), poolclass=NullPool
            )
            if not sa.inspect(engine).has_table(self.group.tables[0].name):  # created, never migrated
                engine.dispose()
                engine = None
        if engine is None:
            from sqlalchemy.pool import StaticPool

            engine = sa.create_engine("sqlite://", poolclass=StaticPool)
            for table in self.group.tables:  # created on a full disk: nothing saved yet
                table.create(engine)
        try:
            with engine.connect() as conn, conn.begin():
                yield conn
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise self.error(exc) from exc
        finally:
            engine.dispose()

    def ping(self) -> None:
        """Raise :class:`~crag.errors.StateUnavailableError` unless the database answers now."""
        with self.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def error(self, exc: BaseException) -> KnowledgeBaseError | StateUnavailableError:
        """The one-line crag error for a driver error of this database."""
        reason = _reason(exc)
        if self.shared and isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError)):
            return StateUnavailableError(
                f"state database {self.display} is unavailable: {reason}; check kb.state_uri and that it is running",
                backend_id="postgres",
                step=self.group.name,
            )
        if self.path is not None and any(w in reason for w in ("not a database", "malformed", "corrupt")):
            return KnowledgeBaseError(
                f"{self.group.label} database {self.path} is corrupt ({reason}); move it aside "
                f"(e.g. mv {self.path} {self.path}.bad) and crag will start a new one"
            )
        return KnowledgeBaseError(f"{self.group.label} database {self.display}: {reason}")

    def reset(self) -> None:
        """Close this process's connections and forget the group was migrated (its SQLite file
        was moved aside or deleted): the next use opens, creates and migrates the file anew."""
        with _lock:
            _migrated.discard(self._key())
            engine = _engines.pop((os.getpid(), self.url), None)
        if engine is not None:
            engine.dispose()

    # -- statements that differ between the engines ----------------------------------------
    def insert(self, table: sa.Table) -> Any:
        """An INSERT of ``table`` with ``on_conflict_do_update`` / ``on_conflict_do_nothing``."""
        if self.shared:  # imported here: the PostgreSQL dialect costs ~50 ms to import, unused by default
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def contains(self, column: sa.ColumnElement[Any], text: str) -> sa.ColumnElement[bool]:
        """``column`` holds ``text``, ASCII letters in any case (no LIKE wildcards)."""
        position = sa.func.strpos if self.shared else sa.func.instr
        return position(sa.func.lower(column), sa.func.lower(sa.literal(text))) > 0

    # -- engine and migrations -------------------------------------------------------------
    def _engine(self) -> sa.Engine:
        key = (os.getpid(), self.url)  # a forked worker builds its own pool
        with _lock:
            engine = _engines.get(key)
            if engine is None:
                engine = _engines[key] = self._create_engine()
            return engine

    def _create_engine(self) -> sa.Engine:
        if not self.shared:
            assert self.path is not None
            path = self.path
            # Kept open (Group.keep_open): a read needs no file open, and the last connection
            # closing (which checkpoints the WAL, with its fsyncs) does not happen per statement.
            pool: dict[str, Any] = {"poolclass": QueuePool, "pool_size": 5, "max_overflow": 20}
            engine = sa.create_engine(
                "sqlite://",
                creator=lambda: sqlite3.connect(path, timeout=30, check_same_thread=False),
                **(pool if self.group.keep_open else {"poolclass": NullPool}),
            )
            sa.event.listen(engine, "connect", _sqlite_autocommit)
            sa.event.listen(engine, "begin", _sqlite_begin)
            return engine
        from crag.extras import require

        require("psycopg", "postgres", "kb.state_uri = postgresql://...")
        url = make_url(self.url).set(drivername="postgresql+psycopg")
        ms = int(self.timeout * 1000)
        return sa.create_engine(
            url,
            pool_pre_ping=True,  # a connection the server dropped (a restart) is replaced, not used
            pool_size=5,
            max_overflow=10,
            pool_timeout=self.timeout,
            pool_recycle=1800,
            connect_args={
                "connect_timeout": max(2, math.ceil(self.timeout)),  # libpq counts whole seconds, at least 2
                "options": f"-c statement_timeout={ms} -c lock_timeout={ms}",
                "application_name": "crag",
                "tcp_user_timeout": ms,  # a host that stops acknowledging (a partition) fails the call
                "keepalives": 1,  # a server that vanishes between statements is noticed, not waited on
                "keepalives_idle": 5,
                "keepalives_interval": 2,
                "keepalives_count": 2,
            },
        )

    def _key(self) -> tuple[int, str, str, str]:
        return (os.getpid(), self.url, self.group.name, self.group.head)

    def _ready(self) -> sa.Engine:
        """The engine, once the group's tables are at their newest revision in this database."""
        if self.path is not None and not self.path.exists():
            self.reset()  # deleted or moved since: pooled connections would write to the old file
        key = self._key()
        with _lock:
            migrated = key in _migrated
        if migrated:
            return self._engine()
        if self.path is not None:
            make_folder(self.path.parent, f"{self.group.label} database")
            try:
                raw = sqlite3.connect(self.path, timeout=30)
                try:
                    set_wal(raw)  # readers in other processes never block a writer; kept in the file
                finally:
                    raw.close()
            except sqlite3.Error as exc:
                raise self.error(exc) from exc
        engine = self._engine()
        with engine.connect() as conn:
            applied: list[str] = []
            if current_revision(conn, self.group) != self.group.head:
                conn.rollback()  # end the read's transaction: the upgrade takes the write lock
                with conn.execution_options(crag_write=True).begin():
                    if self.shared:
                        conn.execute(sa.text("SET LOCAL statement_timeout = 0"))  # a big table may take a while
                        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
                    applied = upgrade(conn, self.group)  # re-reads the revision under the lock
        with _lock:
            _migrated.add(key)
        self.applied = applied
        return engine


def _sqlite_autocommit(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own implicit BEGIN would defer the write lock; transactions are begun below.
    dbapi_connection.isolation_level = None


def _sqlite_begin(conn: sa.Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("crag_write") else "BEGIN")


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split())
    return text[:300] or type(orig).__name__
