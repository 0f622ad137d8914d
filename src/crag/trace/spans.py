"""Per-request tracing: timed spans, recorded decisions, and secret redaction.

A ``Tracer`` is CRAG's black box for one question. The pipeline times each step in
``tracer.span(...)`` and, as an observer of the steps' values, records what they decided
with ``tracer.record(...)`` (:mod:`crag.pipeline.events`); the engine saves
``tracer.to_dict()`` in a :class:`crag.trace.store.TraceStore`.

The tracer only records: it is passed to the pipeline explicitly, and no step reads it.
Steps return what degraded as values, so deep code never needs to reach a tracer.
"""

from __future__ import annotations

import contextvars
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from crag.redact import known_secrets
from crag.redact import redact as _redact

__all__ = [
    "Span",
    "Tracer",
    "env_secrets",
    "new_trace_id",
    "redact",
]


def new_trace_id() -> str:
    """A sortable id: UTC time then randomness, e.g. ``'20250101120000-3f9a1c'``.

    Time first so ``ORDER BY id`` and ``ls``-style listings come out chronological.
    """
    return f"{datetime.now(timezone.utc):%Y%m%d%H%M%S}-{secrets.token_hex(3)}"


@dataclass
class Span:
    """One timed block of a request.

    ``start`` is wall-clock epoch seconds (for display); ``duration_ms`` comes from a
    monotonic clock (for accuracy). ``depth`` is 0 for top-level spans.
    """

    name: str
    start: float
    duration_ms: float = 0.0
    tags: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    depth: int = 0
    parent: str | None = None


# The innermost open span in this context, so nested spans know their parent.
_active_span: contextvars.ContextVar[Span | None] = contextvars.ContextVar("crag_active_span", default=None)


class Tracer:
    """Records the decision path of one request.

    >>> tracer = Tracer()
    >>> with tracer.span("retrieve", k=5):
    ...     tracer.record("retrieved", [{"id": "a", "score": 0.9}])
    >>> tracer.append("degradations", "web search timed out; used internal only")
    >>> sorted(tracer.timings())
    ['retrieve', 'total']
    >>> tracer.to_dict()["degradations"]
    ['web search timed out; used internal only']
    """

    def __init__(self, trace_id: str | None = None) -> None:
        self.id: str = trace_id or new_trace_id()
        self.created_at: str = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        self.spans: list[Span] = []
        self.events: dict[str, Any] = {}
        self._t0 = time.perf_counter()
        self._end = self._t0  # monotonic end of the last finished span
        # Steps may run in worker threads (parallel retrieval / web search).
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since the tracer was made (the request's start)."""
        return time.perf_counter() - self._t0

    @contextmanager
    def span(self, name: str, **tags: Any) -> Iterator[Span]:
        """Time the ``with`` block; on an exception record it on the span and re-raise.

        >>> t = Tracer()
        >>> with t.span("generate", model="qwen") as s:
        ...     s.tags["tokens"] = 42          # tags can be added from inside
        """
        parent = _active_span.get()
        span = Span(
            name=name,
            start=time.time(),
            tags=dict(tags),
            depth=parent.depth + 1 if parent else 0,
            parent=parent.name if parent else None,
        )
        self._add_span(span)
        token = _active_span.set(span)
        t0 = time.perf_counter()
        try:
            yield span
        except BaseException as exc:
            span.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            end = time.perf_counter()
            span.duration_ms = (end - t0) * 1000.0
            _active_span.reset(token)
            with self._lock:
                self._end = max(self._end, end)

    def _add_span(self, span: Span) -> None:
        # Appended on entry so the list is in start order, parents before children.
        with self._lock:
            self.spans.append(span)

    def record(self, key: str, value: Any) -> None:
        """Store structured data under ``key`` (last write wins)."""
        with self._lock:
            self.events[key] = value

    def append(self, key: str, item: Any) -> None:
        """Add ``item`` to the list under ``key`` (e.g. ``"degradations"``, ``"errors"``)."""
        with self._lock:
            self.events.setdefault(key, []).append(item)

    def timings(self) -> dict[str, float]:
        """Seconds per span name (summed when a name repeats), plus ``"total"``.

        ``total`` is wall time from the tracer's creation to the end of the last
        finished span, so it is stable once the request is done and is not inflated
        by nested spans the way a plain sum would be.
        """
        out: dict[str, float] = {}
        with self._lock:
            for s in self.spans:
                out[s.name] = out.get(s.name, 0.0) + s.duration_ms / 1000.0
            out["total"] = self._end - self._t0
        return out

    def to_dict(self) -> dict[str, Any]:
        """The trace as a JSON-ready dict: ``{"id", "created_at", "spans", "timings", **events}``.

        ``timings`` is computed from the spans unless a step recorded its own.
        """
        with self._lock:
            spans = [asdict(s) for s in self.spans]
            events = dict(self.events)
        return {
            "id": self.id,
            "created_at": self.created_at,
            "spans": spans,
            "timings": self.timings(),
            **events,
        }


def env_secrets() -> list[str]:
    """Every secret value known to :mod:`crag.redact` (environment and registered keys)."""
    return known_secrets()


def redact(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """Return a copy of ``obj`` with secrets (≥ 6 chars) and key-shaped strings replaced by ``***``.

    Kept here for callers of the tracer; the one implementation is :func:`crag.redact.redact`.

    >>> redact({"url": "https://x/?key=sk-abcdef123"}, ["sk-abcdef123"])
    {'url': 'https://x/?key=***'}
    """
    return _redact(obj, secrets)
