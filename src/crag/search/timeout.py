"""Deadlines for slow backends: a per-call timeout and an overall request deadline.

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
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from crag.errors import BackendError, LLMUnavailableError, SearchError
from crag.protocols import LLM, Completion
from crag.types import WebResult

T = TypeVar("T")


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
    error: type[BackendError] = SearchError,
    backend_id: str = "",
    step: str = "search",
) -> T:
    """Run ``fn()`` in a worker thread and wait at most ``timeout`` seconds for it.

    On timeout raise ``error`` (``SearchError`` by default); an exception from ``fn``
    is re-raised as it is. The worker is a daemon thread running in a copy of the
    caller's context, so it sees the current tracer and, if the backend hangs for
    good, does not keep the process alive. (Python cannot kill a thread; the hung
    call finishes or dies with the process — the caller has moved on either way.)
    """
    if timeout <= 0:
        raise error(f"{what} skipped: no time left before the deadline", backend_id=backend_id, step=step)
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=work, name=f"crag-deadline-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise error(f"{what} timed out after {timeout:g}s", backend_id=backend_id, step=step)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class TimeoutSearch:
    """Wrap a ``WebSearch`` so each call ends within ``timeout`` and the request ``deadline``.

    A timeout raises ``SearchError``, which the pipeline already turns into a degradation.

    ### Usage example
    >>> from crag.testing.fakes import StaticWebSearch
    >>> search = TimeoutSearch(StaticWebSearch([WebResult("t", "https://e.org", "c")]), timeout=2.0)
    >>> [r.url for r in search.search("q", k=1)]
    ['https://e.org']
    """

    def __init__(self, inner: Any, *, timeout: float, deadline: Deadline | None = None) -> None:
        self.inner = inner
        self.timeout = timeout
        self.deadline = deadline or Deadline(None)
        self.name: str = getattr(inner, "name", "search")

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """``inner.search`` with the per-call timeout capped by the request deadline."""
        budget = self.deadline.cap(self.timeout)
        return with_deadline(
            lambda: self.inner.search(query, k=k),
            budget,
            what=f"{self.name} search",
            backend_id=self.name,
        )


GENERATION_GRACE = 0.25  # share of the deadline an LLM call may run past it (to answer at all)


class TimeoutLLM:
    """Wrap an ``LLM`` so no call outlives the request deadline by more than a grace.

    Correction may use the whole deadline; the answer still needs one LLM call, so each
    call may end up to ``GENERATION_GRACE`` × the deadline after it. A model that has not
    answered by then (down, hung, trickling) raises ``LLMUnavailableError``: the request
    is refused with that one line instead of waiting for ``llm.timeout``.

    ### Usage example
    >>> from crag.testing.fakes import ScriptedLLM
    >>> llm = TimeoutLLM(ScriptedLLM(["Paris [1]."]), Deadline(5))
    >>> llm.complete([{"role": "user", "content": "Capital of France?"}]).text
    'Paris [1].'
    """

    def __init__(self, inner: LLM, deadline: Deadline) -> None:
        self.inner = inner
        self.deadline = deadline
        self.model_id = inner.model_id

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        if self.deadline.seconds is None:
            return self.inner.complete(messages, **kw)
        budget = self.deadline.remaining() + self.deadline.seconds * GENERATION_GRACE
        return with_deadline(
            lambda: self.inner.complete(messages, **kw),
            budget,
            what=f"LLM {self.model_id} (past correction.deadline_seconds = {self.deadline.seconds:g})",
            error=LLMUnavailableError,
            backend_id=self.model_id,
            step="complete",
        )
