"""Child processes that die with their parent, ``kill -9`` of the parent included.

A worker process (an embedding worker of ``crag ingest --workers``, a uvicorn worker of
``crag serve --workers``) calls :func:`die_with_parent` first thing. On Linux the kernel then
sends it SIGKILL when its parent goes (``PR_SET_PDEATHSIG``); everywhere, a watchdog thread
exits it within ``WATCHDOG_SECONDS`` of being re-parented. Without this, a killed ``crag
serve`` left its workers serving on the port and a restart failed with "Address already in
use". Once every worker is gone, multiprocessing's resource tracker reads the end of its
pipe and exits too.

``PR_SET_PDEATHSIG`` fires when the parent *thread* that started the child ends, so the
parent says whether it started the child from its main thread (``deathsig``); otherwise the
watchdog alone is used.

### Usage example
>>> import os
>>> def worker_init(parent: int) -> None:      # run in the child, e.g. a pool initializer
...     die_with_parent(parent)
>>> # ProcessPoolExecutor(initializer=worker_init, initargs=(os.getpid(),), ...)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["WATCHDOG_SECONDS", "die_with_parent"]

WATCHDOG_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


def die_with_parent(parent: int, *, deathsig: bool = True) -> None:
    """In a child process: exit as soon as ``parent`` is gone (now, if it already is)."""
    if deathsig:
        _set_parent_death_signal()
    threading.Thread(target=_watch_parent, args=(parent,), name="crag-parent-watchdog", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the guards were in place
        os._exit(1)


def _set_parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent thread exits; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    # Portable fallback: an orphan is re-parented (to init or a subreaper), so its ppid changes.
    while os.getppid() == parent:
        time.sleep(WATCHDOG_SECONDS)
    os._exit(1)
