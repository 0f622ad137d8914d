"""A copy of a store's folder where there is room: how a vector store is read while its disk is full.

Chroma writes to its SQLite file every time it opens (it records its tenant and database), so
on a full disk it cannot open at all, not even to read: a knowledge base of a few hundred chunks
could not answer a question. Nothing can change the knowledge base while its disk is full
(every write is refused first, in the manifest), so a copy of the store's folder *is* the
store: :func:`snapshot` copies it into memory (``/dev/shm``) or onto another file system that
has room, and the store opens the copy for reading. The copy goes when the store reopens with
space back, or when the process ends; a process killed before it could remove its copy
(``crag serve`` stopped by a signal) leaves it to the next copy taken, which removes every copy
whose process is gone (their names carry the process id).

>>> copy = snapshot(Path("kb/chroma"))        # doctest: +SKIP
>>> copy.path if copy else "no room anywhere"  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SNAPSHOT_MAX_BYTES", "Snapshot", "snapshot"]

log = logging.getLogger("crag.store")

# Larger stores are not copied (memory and time): they fall back to keyword search while the
# disk is full. 1 GiB of Chroma files is ~250,000 chunks of 384 dimensions.
SNAPSHOT_MAX_BYTES = 1 << 30
_HEADROOM = 16 << 20  # room left beside the copy for the store's own journal and what it writes on open


@dataclass
class Snapshot:
    """A copy of a store folder at ``path``, removed by :meth:`drop` (or at exit)."""

    path: Path
    _dir: tempfile.TemporaryDirectory[str] = field(repr=False)

    def drop(self) -> None:
        """Remove the copy (a store engine still reading it keeps its open files until it is done)."""
        with contextlib.suppress(OSError):
            self._dir.cleanup()


def _places() -> list[Path]:
    """Where a copy may go, memory first: a copy on the full disk itself would fail anyway."""
    found: list[Path] = []
    for raw in ("/dev/shm", os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()):
        if raw and Path(raw).is_dir() and os.access(raw, os.W_OK) and Path(raw) not in found:
            found.append(Path(raw))
    return found


_PREFIX = "crag-readonly-"


def _sweep(place: Path) -> None:
    """Remove the copies of processes that are gone (``crag-readonly-<pid>-…``)."""
    for old in place.glob(f"{_PREFIX}*"):
        pid = old.name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive, and not ours to judge
        return True
    return True


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def snapshot(folder: Path, *, max_bytes: int = SNAPSHOT_MAX_BYTES) -> Snapshot | None:
    """A copy of ``folder`` in the first place with room for it, or None (too large, no room, unreadable)."""
    try:
        size = _size(folder)
    except OSError:
        return None
    if size > max_bytes:
        log.warning("the vector store at %s (%d bytes) is too large to copy for reading on a full disk", folder, size)
        return None
    for place in _places():
        try:
            _sweep(place)
            if shutil.disk_usage(place).free < size + _HEADROOM:
                continue
            tmp = tempfile.TemporaryDirectory(prefix=f"{_PREFIX}{os.getpid()}-", dir=place)
            path = Path(tmp.name) / folder.name
            try:
                shutil.copytree(folder, path)
            except OSError:
                tmp.cleanup()
                continue
        except OSError:
            continue
        log.info("disk full: reading the vector store from a copy at %s", path)
        return Snapshot(path, tmp)
    return None
