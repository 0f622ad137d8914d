"""The trace's observer: each step event's record written on the request's tracer as it happens.

The record is :func:`crag.pipeline.events.render`'s, the same event a client is sent, so
what a client saw and what the trace holds agree.
"""

from __future__ import annotations

from typing import Any

from crag.event_names import EventName
from crag.pipeline.events import event_for, render
from crag.trace.spans import Tracer

__all__ = ["TraceRecorder"]


class TraceRecorder:
    """Records step events on ``tracer`` (``Steps`` makes one per request).

    >>> from crag.types import Query
    >>> t = Tracer()
    >>> TraceRecorder(t)("query", Query("Who?", "en", upper=0.6, lower=0.35))
    >>> t.events["question"], t.events["thresholds"]["upper"]
    ('Who?', 0.6)
    """

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def __call__(self, name: EventName, value: Any) -> None:
        for key, item in render(event_for(name, value)).record.items():
            if key == "degradations":
                for note in item:
                    self.tracer.append(key, note)
            else:
                self.tracer.record(key, item)
