"""A real, small file system to fill up (tests and benchmarks of disk-full handling).

:func:`small_disk` mounts a tmpfs of ``size_mb`` megabytes (root only; ``None`` otherwise, so
a test can skip) and unmounts it afterwards; :func:`fill` takes all its free space but
``leave`` bytes with one filler file, and :func:`unfill` gives the space back.

### Usage example
>>> with small_disk(64) as disk:                  # doctest: +SKIP
...     kb = disk / "kb"                          # ingest, then:
...     fill(disk)                                # 0 bytes free: writes fail with ENOSPC
...     unfill(disk)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fill", "small_disk", "unfill"]

_FILLER = ".filler"


@contextlib.contextmanager
def small_disk(size_mb: int) -> Iterator[Path | None]:
    """A fresh tmpfs of ``size_mb`` MB mounted on a temporary folder, or ``None`` when not root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        yield None
        return
    point = Path(tempfile.mkdtemp(prefix="crag-small-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(point)], capture_output=True
    )
    if mounted.returncode != 0:  # a container without CAP_SYS_ADMIN
        point.rmdir()
        yield None
        return
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)
        with contextlib.suppress(OSError):
            point.rmdir()


def fill(disk: Path, leave: int = 0) -> int:
    """Write a filler file until the disk holding ``disk`` has at most ``leave`` bytes free; return its size."""
    written = 0
    block = b"\0" * (1 << 20)
    with (disk / _FILLER).open("ab", buffering=0) as f:
        while (room := shutil.disk_usage(disk).free - leave) > 0:
            try:
                n = f.write(block[: min(len(block), room)])
            except OSError:  # full: tmpfs counts whole pages
                break
            written += n or 0
    return written


def unfill(disk: Path) -> None:
    """Give back the space :func:`fill` took."""
    (disk / _FILLER).unlink(missing_ok=True)
