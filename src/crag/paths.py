"""Folders: where crag keeps caches (assembled models, embedding vectors), and creating them.

``CRAG_CACHE_DIR`` wins; the Makefile points it at the project's own ``.cache/crag``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crag.errors import DiskFullError


def cache_dir() -> Path:
    """The cache folder (created on first use)."""
    root = Path(os.environ.get("CRAG_CACHE_DIR") or Path.home() / ".cache" / "crag")
    root.mkdir(parents=True, exist_ok=True)
    return root


def make_folder(path: Path, what: str) -> None:
    """Create ``path`` (and parents) or raise a one-line ``KnowledgeBaseError`` saying why not.

    >>> make_folder(Path("/dev/null"), "knowledge base")
    Traceback (most recent call last):
    crag.errors.KnowledgeBaseError: knowledge base path /dev/null is a file, not a folder; ...
    """
    from crag.errors import KnowledgeBaseError

    if path.exists() and not path.is_dir():
        raise KnowledgeBaseError(f"{what} path {path} is a file, not a folder; pass a folder (new or existing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KnowledgeBaseError(
            f"cannot create {what} folder {path}: {exc.strerror or type(exc).__name__}; pass a folder you can write to"
        ) from None


# Below this much free space, a write that failed without saying why (SQLite's "disk I/O
# error", Chroma's "Error in compaction") is taken to have failed for lack of space.
LOW_SPACE_BYTES = 16 * 1024 * 1024
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_WORDS = ("no space left", "disk is full", "database or disk is full", "quota exceeded", "not enough space")


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent); None if unknown."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def is_disk_full(path: Path, exc: BaseException | None = None) -> bool:
    """Whether a failed write under ``path`` failed because the disk is full.

    True when the error (or one it was raised from) says so (``ENOSPC``, ``EDQUOT``, SQLite's
    "database or disk is full"), or when the error is opaque and the file system holding
    ``path`` has less than ``LOW_SPACE_BYTES`` free.

    >>> is_disk_full(Path("."), OSError(errno.ENOSPC, "No space left on device"))
    True
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in _FULL_ERRNOS:
            return True
        if any(word in str(cur).lower() for word in _FULL_WORDS):
            return True
        cur = cur.__cause__ or cur.__context__
    free = free_bytes(path)
    return free is not None and free < LOW_SPACE_BYTES


def disk_full_error(path: Path, doing: str, then: str) -> DiskFullError:
    """The one-line ``DiskFullError``: "disk full at PATH (N bytes free): DOING; THEN"."""
    from crag.errors import DiskFullError

    free = free_bytes(path)
    room = f" ({free:,} bytes free)" if free is not None else ""
    return DiskFullError(f"disk full at {path}{room}: {doing}; {then}", path=str(path))


@contextlib.contextmanager
def said_disk_full(path: Path, doing: str, then: str) -> Iterator[None]:
    """Turn a write under ``path`` that failed for lack of space (an opaque Chroma or SQLite
    error included) into one ``DiskFullError``; other errors pass unchanged."""
    from crag.errors import StoreError

    try:
        yield
    except (StoreError, OSError, sqlite3.Error) as exc:
        if not is_disk_full(path, exc):
            raise
        raise disk_full_error(path, doing, then) from None
