"""One writer at a time per knowledge base name, across machines: a PostgreSQL advisory lock.

With ``kb.state_uri`` set, the manifest lives in the shared database
(:mod:`crag.store.manifest_db`) and writers on several machines must queue on something they
all see: a session-level advisory lock on ``(crag, hashtext(kb name))``, held on a connection
of its own for the whole write (an ingest, a removal, the orphan clean-up), instead of the
folder's ``write.lock``. The database releases it when the holder's session ends, so a writer
killed with ``kill -9`` (or cut off from the network) never leaves a stale lock.

The same interface as :class:`crag.store.writelock.WriteLock`: ``hold()`` waits (polling, up to
its timeout), ``try_hold()`` does not. A thread that already holds the lock may take it again
(as ``filelock`` allows); another thread of the same process waits like another machine.

### Usage example
>>> from crag.state import MANIFEST, StateDB                                      # doctest: +SKIP
>>> lock = AdvisoryWriteLock(StateDB("postgresql://crag@db/crag", MANIFEST, scope="handbook"))  # doctest: +SKIP
>>> with lock.hold(what="ingest"):                                                # doctest: +SKIP
...     print("writing")       # a writer on another machine waits here
writing
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import sqlalchemy as sa

from crag.errors import KnowledgeBaseError
from crag.state.db import StateDB
from crag.store.writelock import WRITE_TIMEOUT

__all__ = ["AdvisoryWriteLock"]

_NAMESPACE = 0x63726B6C  # "crkl": the first key of every knowledge base's write lock
_POLL = 0.2  # seconds between tries while another writer holds the lock


class AdvisoryWriteLock:
    """An exclusive lock on knowledge base ``db.scope`` in the shared database ``db``."""

    def __init__(self, db: StateDB) -> None:
        self.db = db
        self.name = db.scope
        self._local = threading.local()  # this thread's depth of holding

    @contextlib.contextmanager
    def hold(self, *, timeout: float | None = None, what: str = "write") -> Iterator[None]:
        """Hold the lock for a write, waiting up to ``timeout`` (default ``WRITE_TIMEOUT``) seconds."""
        if self._depth():
            with self._again():
                yield
            return
        timeout = WRITE_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self.db.session() as conn:
            while not self._try(conn):
                if time.monotonic() >= deadline:
                    raise KnowledgeBaseError(
                        f"cannot {what}: knowledge base {self.name!r} in {self.db.display} is being written by "
                        f"another process (its lock held for more than {timeout:g}s); wait for it to finish "
                        "and run again"
                    )
                time.sleep(_POLL)
            with self._held(conn):
                yield

    def try_hold(self) -> contextlib.AbstractContextManager[None] | None:
        """The lock if it is free right now (a context manager to release it), else ``None``."""
        if self._depth():
            return self._again()
        session = self.db.session()
        conn = session.__enter__()
        try:
            if not self._try(conn):
                session.__exit__(None, None, None)
                return None
        except BaseException as exc:
            session.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return _Releasing(self, session, conn)

    # -- internals -------------------------------------------------------------------------
    def _depth(self) -> int:
        return int(getattr(self._local, "depth", 0))

    @contextlib.contextmanager
    def _again(self) -> Iterator[None]:
        self._local.depth += 1
        try:
            yield
        finally:
            self._local.depth -= 1

    @contextlib.contextmanager
    def _held(self, conn: sa.Connection) -> Iterator[None]:
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            self._release(conn)

    def _try(self, conn: sa.Connection) -> bool:
        q = sa.text("SELECT pg_try_advisory_lock(:ns, hashtext(:name))")
        return bool(conn.execute(q, {"ns": _NAMESPACE, "name": self.name}).scalar_one())

    def _release(self, conn: sa.Connection) -> None:
        try:
            unlock = sa.text("SELECT pg_advisory_unlock(:ns, hashtext(:name))")
            conn.execute(unlock, {"ns": _NAMESPACE, "name": self.name})
        except sa.exc.DBAPIError:
            # The session is gone (the lock with it) or unusable: never return it to the pool
            # while it might still hold the lock.
            conn.invalidate()


class _Releasing(contextlib.AbstractContextManager[None]):
    """What ``try_hold`` returns: entering marks the thread as holder, leaving releases."""

    def __init__(
        self, lock: AdvisoryWriteLock, session: contextlib.AbstractContextManager[sa.Connection], conn: sa.Connection
    ) -> None:
        self._lock, self._session, self._conn = lock, session, conn

    def __enter__(self) -> None:
        self._lock._local.depth = 1

    def __exit__(self, *exc: object) -> None:
        self._lock._local.depth = 0
        try:
            self._lock._release(self._conn)
        finally:
            self._session.__exit__(None, None, None)
