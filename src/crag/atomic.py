"""Write a file so readers see the old content or the new, never half of it.

Every output crag writes for later reading (eval results and reports, graded pairs,
search cassettes, uploaded files) goes through :func:`write_atomic`: a temporary file
in the same folder, flushed to disk, then renamed over the target. A crash or an
interrupt leaves the old file (or none), and no partial file that looks finished.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "sub" / "out.txt"
>>> write_atomic(p, ["a\\n", "b\\n"]) == p, p.read_text()
(True, 'a\\nb\\n')
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_atomic"]


def _umask() -> int:
    # Read once, at import (os.umask can only be read by setting it, which would race threads).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# What open() would give a new file: a written report or export is as readable as any other
# file the user makes (mkstemp's 0600 hid `crag feedback export` output from a teammate).
DEFAULT_MODE = 0o666 & ~_umask()


def write_atomic(path: Path, data: str | bytes | Iterable[str], *, mode: int | None = None) -> Path:
    """Write ``data`` (text, bytes, or lines of text) to ``path`` via a temp file and a rename.

    Parent folders are created. Lines are written as they come, so a generator of
    results never has to fit in memory twice. ``mode`` sets the file's permissions; by
    default those ``open()`` gives a new file under the process's umask. A full disk
    raises ``DiskFullError`` naming the folder, and leaves no temporary file behind.
    """
    path = Path(path)
    try:
        _write(path, data, mode)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the old file (or none) is still in place
            from crag.paths import disk_full_error

            raise disk_full_error(path.parent, f"cannot write {path.name}", "free space and try again") from None
        raise
    return path


def _write(path: Path, data: str | bytes | Iterable[str], mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            elif isinstance(data, str):
                f.write(data.encode("utf-8"))
            else:
                for line in data:
                    f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, DEFAULT_MODE if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
