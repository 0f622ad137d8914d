"""One writer at a time per knowledge base, across processes (``<kb>/write.lock``).

:class:`KBWriteLock` is what a knowledge base holds; :class:`WriteLock` (this file) is the
folder's lock, :class:`crag.store.writelock_db.AdvisoryWriteLock` the shared database's (with
``kb.state_uri``, where writers on other machines must see it).

Several processes may open one knowledge base: ``crag serve`` (one or more workers), a
``crag ingest`` from a shell, a notebook. Every write (ingest, remove, the orphan clean-up
after an interrupted run) holds this lock, so writes never interleave. Readers take it
only briefly, without waiting, to reopen the vector store after another process wrote:
Chroma's embedded engine is not safe to load while another process is persisting it.

The lock is an OS file lock (``filelock``: ``flock`` on Unix), released by the kernel when
its holder dies, so a ``kill -9`` mid-ingest never leaves a stale lock behind.

### Usage example
>>> import tempfile, pathlib
>>> lock = WriteLock(pathlib.Path(tempfile.mkdtemp()) / "write.lock")
>>> with lock.hold(timeout=1.0, what="ingest"):
...     print("writing")          # another process's hold() waits here, its try_hold() is None
writing
>>> held = lock.try_hold()
>>> with held:
...     print("reopening the vector store")
reopening the vector store
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from filelock import FileLock, Timeout

from crag.errors import KnowledgeBaseError

WRITE_TIMEOUT = 600.0  # seconds a writer waits for another process's ingest to finish


class KBWriteLock(Protocol):
    """One writer at a time per knowledge base: ``hold`` waits for it, ``try_hold`` does not
    (``None`` while another writer holds it)."""

    def hold(self, *, timeout: float | None = None, what: str = "write") -> contextlib.AbstractContextManager[None]: ...
    def try_hold(self) -> contextlib.AbstractContextManager[None] | None: ...


class WriteLock:
    """An exclusive, cross-process lock on one knowledge base folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # thread_local: a second thread of this process waits like another process would.
        self._lock = FileLock(str(path), thread_local=True)

    @contextlib.contextmanager
    def hold(self, *, timeout: float | None = None, what: str = "write") -> Iterator[None]:
        """Hold the lock for a write, waiting up to ``timeout`` (default ``WRITE_TIMEOUT``) seconds."""
        timeout = WRITE_TIMEOUT if timeout is None else timeout
        try:
            self._lock.acquire(timeout=timeout)
        except Timeout:
            raise KnowledgeBaseError(
                f"cannot {what}: knowledge base {self.path.parent} is being written by another process "
                f"(lock {self.path} held for more than {timeout:g}s); wait for it to finish and run again"
            ) from None
        except OSError as exc:
            raise KnowledgeBaseError(
                f"cannot {what}: knowledge base {self.path.parent} is not writable ({exc.strerror}); "
                "check the folder's permissions or use another --kb folder"
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    def try_hold(self) -> contextlib.AbstractContextManager[None] | None:
        """The lock if it is free right now (a context manager to release it), else ``None``.

        A folder we cannot write to has no writer either: the caller gets a no-op holder.
        """
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            return None
        except OSError:
            return contextlib.nullcontext()
        return _Releasing(self._lock)


def check_writable(path: Path) -> None:
    """Refuse a read-only knowledge base folder in one line (``KnowledgeBaseError``)."""
    # Even a question writes there (SQLite journals, the keyword index, traces); unchecked, a
    # read-only folder surfaces as "manifest unreadable", which invites deleting it.
    for p in (path, path / "chroma", path / "bm25"):
        if p.is_dir() and not os.access(p, os.W_OK):
            raise KnowledgeBaseError(
                f"knowledge base folder {p} is read-only; crag writes its journals, index and traces "
                "there: make it writable, or copy the knowledge base to a writable --kb folder"
            )


class _Releasing(contextlib.AbstractContextManager[None]):
    def __init__(self, lock: FileLock) -> None:
        self._lock = lock

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
