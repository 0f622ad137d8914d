"""Deadlines for slow backends: a per-call timeout and an overall request deadline.

A base module: search providers, correction steps and the pipeline all take their
timeouts from here (``TimeoutSearch`` in ``crag.search.timeout`` and the request's
``GuardedLLM`` in ``crag.llm.guard`` apply them).

The article's second challenge: web search and LLM rewriting add latency, so every
stage gets a timeout, and a request as a whole gets a deadline after which the
pipeline stops correcting and answers from what it has (a recorded degradation).

>>> import time
>>> with_deadline(lambda: "fast", 1.0)
'fast'
>>> try:
...     with_deadline(lambda: time.sleep(1), 0.05, what="searxng search")
... except SearchError as exc:
...     print(exc)
searxng search timed out after 0.05s
>>> d = Deadline(30)
>>> d.expired(), 29 < d.remaining() <= 30
(False, True)
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TypeVar

from crag.errors import BackendError, SearchError

T = TypeVar("T")

# When the guarded LLM call running in this context must end (``time.monotonic()``): set by
# ``GuardedLLM`` while it waits for a model's next piece, read by a model that waits on a server.
_CALL_END: contextvars.ContextVar[float] = contextvars.ContextVar("crag_call_end", default=math.inf)


class Deadline:
    """The time left for one request; ``None`` seconds means no deadline.

    ### Usage example
    >>> d = Deadline(None)
    >>> d.remaining(), d.expired(), d.cap(10.0)
    (inf, False, 10.0)
    >>> Deadline(0).expired()
    True
    """

    def __init__(self, seconds: float | None, *, clock: Callable[[], float] = time.monotonic) -> None:
        if seconds is not None and seconds < 0:
            raise ValueError("deadline seconds must be >= 0")
        self.seconds = seconds
        self._clock = clock
        self._end = math.inf if seconds is None else clock() + seconds

    def remaining(self) -> float:
        """Seconds left (``inf`` without a deadline, never negative)."""
        return max(0.0, self._end - self._clock())

    def expired(self) -> bool:
        """True once no time is left."""
        return self.remaining() <= 0.0

    def cap(self, timeout: float) -> float:
        """``timeout`` shortened to the time left, so a stage never outlives the request."""
        return min(timeout, self.remaining())

    def __repr__(self) -> str:
        return f"Deadline(seconds={self.seconds!r}, remaining={self.remaining():.3f})"


def with_deadline(
    fn: Callable[[], T],
    timeout: float,
    *,
    what: str = "call",
    hint: str = "",
    error: type[BackendError] = SearchError,
    backend_id: str = "",
    step: str = "search",
) -> T:
    """Run ``fn()`` in a worker thread and wait at most ``timeout`` seconds for it.

    On timeout raise ``error`` (``SearchError`` by default) saying ``what`` timed out,
    followed by ``hint`` (what to do) when given; an exception from ``fn`` is re-raised
    as it is. The worker is a daemon thread running in a copy of the
    caller's context (so a span opened inside nests under the caller's) and, if the
    backend hangs for good, does not keep the process alive. (Python cannot kill a thread; the hung
    call finishes or dies with the process — the caller has moved on either way.)
    """
    if timeout <= 0:
        raise error(f"{what} skipped: no time left before the deadline", backend_id=backend_id, step=step)
    value: list[T] = []
    failure: list[BaseException] = []
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            value.append(ctx.run(fn))
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)

    worker = threading.Thread(target=work, name=f"crag-deadline-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        hint = f"; {hint}" if hint else ""
        raise error(f"{what} timed out after {timeout:g}s{hint}", backend_id=backend_id, step=step)
    if failure:
        raise failure[0]
    return value[0]


class call_ends_at:  # lower case: used like a function: ``with call_ends_at(end):``
    """Publish, for the block, when the guarded call running in this context must end.

    >>> with call_ends_at(time.monotonic() + 2):
    ...     0 < call_time_left(60) <= 2
    True
    >>> call_time_left(60)
    60
    """

    __slots__ = ("_end", "_token")

    def __init__(self, end: float) -> None:
        self._end = end

    def __enter__(self) -> None:
        self._token = _CALL_END.set(self._end)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        _CALL_END.reset(self._token)


def call_time_left(timeout: float) -> float:
    """``timeout`` shortened to what the guarded call in this context has left (at least 0.05 s,
    so a call past its end fails at once rather than being refused by the client library)."""
    end = _CALL_END.get()
    if end == math.inf:
        return timeout
    return max(0.05, min(timeout, end - time.monotonic()))
