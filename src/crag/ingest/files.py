"""Open a source file only when it is a regular file, so that no read can block.

A FIFO in an ingested folder blocks ``open()`` until a writer appears; a ``*.txt`` symlink to
``/dev/zero`` streams bytes without end; a socket or a device is no document either. So
:func:`regular_file_problem` names what a path is from its ``stat`` (following symlinks, so a
symlink loop is named too) before anything opens it, and :func:`open_regular` opens without
blocking (``O_NONBLOCK``, ``O_NOCTTY``) and checks the *opened* file's type with ``fstat``
before the first read: a file swapped for a FIFO between the two checks is refused as well.

>>> from pathlib import Path
>>> regular_file_problem(Path("/dev/zero"))
'a character device, not a regular file; only regular files are read'
>>> with open_regular(Path("notes.txt")) as fh:    # doctest: +SKIP
...     data = fh.read()
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from crag.errors import UnsupportedFileError
from crag.text import terminal_safe

__all__ = ["open_regular", "regular_file_problem"]

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def regular_file_problem(path: Path) -> str | None:
    """``None`` when ``path`` (after symlinks) is a regular file; else why it is not read, in one line."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return _stat_problem(path, exc)
    return _mode_problem(st.st_mode)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for binary reading, or ``UnsupportedFileError`` when it is not a regular file.

    Never blocks: the open is non-blocking and the file's type is checked on the open file
    before it is switched back to ordinary (blocking) reads.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise UnsupportedFileError(f"{_name(path)}: {_stat_problem(path, exc)}") from None
    try:
        problem = _mode_problem(os.fstat(fd).st_mode)
        if problem:
            raise UnsupportedFileError(f"{_name(path)}: {problem}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _mode_problem(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return f"{kind}, not a regular file; only regular files are read"


def _stat_problem(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop (the link leads back to itself); fix or remove the link"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return "broken symlink (its target does not exist); fix or remove the link"
    if exc.errno == errno.ENXIO:  # opening a Unix socket
        return "a socket, not a regular file; only regular files are read"
    return f"cannot read: {exc.strerror or type(exc).__name__}; check it is a readable file"


def _name(path: Path) -> str:
    return terminal_safe(os.fsencode(path).decode("utf-8", "replace"), one_line=True)
