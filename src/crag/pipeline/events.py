"""A run's events, one frozen dataclass each, and :func:`render`, the one place they become bytes.

``run_crag`` hands every step's value to its observers as the step finishes (see the table
in :mod:`crag.pipeline`), under a name checked by the type checker (:data:`EventName`).
:func:`event_for` makes that the step's event: a :class:`StepEvent` carrying the typed value
(``QueryEvent.value`` is a :class:`~crag.types.Query`). Three events exist only on the wire
of a streamed HTTP answer: :class:`StartedEvent`, :class:`DoneEvent` (the ``answer`` event
as it is sent) and :class:`ErrorEvent`.

:func:`render` turns any event into what each reader takes from it: its server-sent event
(``POST /v1/ask`` with ``stream=true``), its OpenAI ``chat.completion.chunk`` bodies, and
its trace record (what :class:`crag.pipeline.recorder.TraceRecorder` writes). The server, the CLI and the
integrations read events through it and compare with the event classes, never with a raw
name; the web UI reads the names from ``static/events.js`` (:mod:`crag.event_names`).
Adding a step means adding its name to :data:`EventName` and one class here.

>>> from crag.types import Query
>>> event = event_for("query", Query("Who?", "en", upper=0.6, lower=0.35))
>>> event.name, event.data["thresholds"]["upper"], render(event).record["thresholds"]["upper"]
('query', 0.6, 0.6)
>>> render(event_for("token", "Par")).sse
b'event: token\\ndata: {"delta": "Par"}\\n\\n'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from crag.correct.bearers import Bearers
from crag.correct.condense import Condensed
from crag.correct.rounds import RoundsResult
from crag.correct.verify import Verification
from crag.event_names import EVENT_NAMES, EventName, WireName
from crag.generate import Generation, Replace
from crag.pipeline import event_shapes as shapes
from crag.pipeline.answer_cache import CacheHit
from crag.pipeline.correction import Correction, Refinement, Rewrite, Search
from crag.pipeline.event_shapes import Json, chat_chunk
from crag.pipeline.steps import Context, CorrectedContext, Decision
from crag.redact import redact
from crag.types import Answer, Evaluation, Query, Retrieval

__all__ = [
    "STEP_EVENTS", "AbstainEvent", "AnswerEvent", "BearersEvent", "CacheEvent", "CompressEvent", "CondenseEvent",
    "ContextEvent", "CorrectEvent", "DecideEvent", "DoneEvent", "ErrorEvent", "EscalateEvent", "EvaluateEvent",
    "Event", "EventName", "FuseEvent", "GenerateEvent", "QueryEvent", "RefineEvent", "RefineExternalEvent",
    "Rendered", "ReplaceEvent", "RetrieveEvent", "RewriteEvent", "RoundsEvent", "SearchEvent", "StartedEvent",
    "StepEvent", "TokenEvent", "VerifyEvent", "WireName", "event_for", "render",
]  # fmt: skip

V = TypeVar("V")


@dataclass(frozen=True)
class Event:
    """One event: its ``name``, the JSON a client gets (``data``) and what the trace keeps."""

    name: ClassVar[EventName | WireName]
    composite: ClassVar[bool] = False  # repeats its parts' degradations: they are not sent or recorded again

    @cached_property
    def data(self) -> Json:
        """The small JSON object a client gets for this event, with the step's degradations."""
        data = self.summary()
        notes = self.degradations()
        if notes and not self.composite:
            data["degradations"] = list(notes)
        return data

    def summary(self) -> Json:
        raise NotImplementedError

    def trace(self) -> Json:
        """The keys this event sets in the trace (none for most wire-only events)."""
        return {}

    def degradations(self) -> list[str]:
        return []

    def wire(self) -> Event:
        """The event as a streamed HTTP answer sends it (``answer`` goes out as ``done``)."""
        return self

    def chat(self, include_usage: bool) -> list[Json]:
        """Its OpenAI chat-completion chunk bodies besides answer text (none for most events)."""
        return []


@dataclass(frozen=True)
class StepEvent(Event, Generic[V]):
    """A step's event: ``value`` is what the step returned (a :class:`~crag.types.Query` for ``query``)."""

    name: ClassVar[EventName]
    value: V

    def degradations(self) -> list[str]:
        return list(getattr(self.value, "degradations", None) or [])


# -- the pipeline's events, in the order they can come ---------------------------------------
@dataclass(frozen=True)
class CondenseEvent(StepEvent[Condensed]):
    name = "condense"

    def summary(self) -> Json:
        return shapes.condense_summary(self.value)

    def trace(self) -> Json:
        return shapes.condense_record(self.value)


@dataclass(frozen=True)
class QueryEvent(StepEvent[Query]):
    name = "query"

    def summary(self) -> Json:
        return shapes.query_summary(self.value)

    def trace(self) -> Json:
        return shapes.query_record(self.value)


@dataclass(frozen=True)
class CacheEvent(StepEvent[CacheHit]):
    name = "cache"

    def summary(self) -> Json:
        return shapes.cache_summary(self.value)

    def trace(self) -> Json:
        return shapes.cache_record(self.value)


@dataclass(frozen=True)
class RetrieveEvent(StepEvent[Retrieval]):
    name = "retrieve"

    def summary(self) -> Json:
        return shapes.retrieve_summary(self.value)

    def trace(self) -> Json:
        return shapes.retrieve_record(self.value)


@dataclass(frozen=True)
class EvaluateEvent(StepEvent[Evaluation]):
    name = "evaluate"

    def summary(self) -> Json:
        return shapes.evaluate_summary(self.value)

    def trace(self) -> Json:
        return shapes.evaluate_record(self.value)


@dataclass(frozen=True)
class DecideEvent(StepEvent[Decision]):
    name = "decide"

    def summary(self) -> Json:
        return shapes.decide_summary(self.value)

    def trace(self) -> Json:
        return {"action": self.value.action.value}


@dataclass(frozen=True)
class VerifyEvent(StepEvent[Verification]):
    name = "verify"

    def summary(self) -> Json:
        return shapes.verify_summary(self.value)

    def trace(self) -> Json:
        return {"verification": shapes.verify_summary(self.value)}


@dataclass(frozen=True)
class EscalateEvent(StepEvent[Decision]):
    """Correct left for Ambiguous; ``data["rejected"]`` says why (``crag.types.REJECTED_*`` or the reply's reason)."""

    name = "escalate"

    def summary(self) -> Json:
        return shapes.decide_summary(self.value) | shapes.escalation(self.value)

    def trace(self) -> Json:
        return shapes.escalate_record(self.value)


@dataclass(frozen=True)
class RefineEvent(StepEvent[Refinement]):
    name = "refine"

    def summary(self) -> Json:
        return shapes.refine_summary(self.value)


@dataclass(frozen=True)
class RewriteEvent(StepEvent[Rewrite]):
    name = "rewrite"

    def summary(self) -> Json:
        return shapes.rewrite_summary(self.value)

    def trace(self) -> Json:
        return shapes.rewrite_record(self.value)


@dataclass(frozen=True)
class SearchEvent(StepEvent[Search]):
    name = "search"

    def summary(self) -> Json:
        return shapes.search_summary(self.value)

    def trace(self) -> Json:
        return shapes.search_record(self.value)


@dataclass(frozen=True)
class RefineExternalEvent(StepEvent[Refinement]):
    name = "refine_external"

    def summary(self) -> Json:
        return shapes.refine_summary(self.value)


@dataclass(frozen=True)
class RoundsEvent(StepEvent[RoundsResult]):
    name = "rounds"

    def summary(self) -> Json:
        return shapes.rounds_summary(self.value)

    def trace(self) -> Json:
        return {"rounds": shapes.rounds_summary(self.value) | {"queries": self.value.queries}}


@dataclass(frozen=True)
class CorrectEvent(StepEvent[Correction]):
    name = "correct"
    composite = True

    def summary(self) -> Json:
        return shapes.correct_summary(self.value)

    def trace(self) -> Json:
        return shapes.correct_record(self.value)


@dataclass(frozen=True)
class FuseEvent(StepEvent[Context]):
    name = "fuse"

    def summary(self) -> Json:
        return shapes.context_summary(self.value)

    def trace(self) -> Json:
        return shapes.fuse_record(self.value)


@dataclass(frozen=True)
class CompressEvent(StepEvent[Context]):
    name = "compress"

    def summary(self) -> Json:
        return shapes.context_summary(self.value)


@dataclass(frozen=True)
class BearersEvent(StepEvent[Bearers]):
    name = "bearers"

    def summary(self) -> Json:
        return shapes.bearers_summary(self.value)

    def trace(self) -> Json:
        return shapes.bearers_record(self.value)


@dataclass(frozen=True)
class AbstainEvent(StepEvent[Generation]):
    name = "abstain"

    def summary(self) -> Json:
        return shapes.generation_summary(self.value)

    def trace(self) -> Json:
        return shapes.abstain_record(self.value)


@dataclass(frozen=True)
class TokenEvent(StepEvent[str]):
    """A piece of the *verified* answer: the pieces joined are the answer's text."""

    name = "token"

    def summary(self) -> Json:
        return {"delta": self.value}


@dataclass(frozen=True)
class ReplaceEvent(StepEvent[Replace]):
    """An escalation swapped a verified answer for a better one: the text so far is void."""

    name = "replace"

    def summary(self) -> Json:
        return shapes.replace_summary(self.value)


@dataclass(frozen=True)
class GenerateEvent(StepEvent[Generation]):
    name = "generate"

    def summary(self) -> Json:
        return shapes.generation_summary(self.value)

    def trace(self) -> Json:
        return shapes.generate_record(self.value)


@dataclass(frozen=True)
class AnswerEvent(StepEvent[Answer]):
    """The run's last event: ``value`` is the :class:`~crag.types.Answer` (sent as ``done``)."""

    name = "answer"
    composite = True

    def summary(self) -> Json:
        return self.value.to_dict()

    def trace(self) -> Json:
        return shapes.answer_record(self.value)

    def wire(self) -> Event:
        return DoneEvent(self.value)


@dataclass(frozen=True)
class ContextEvent(StepEvent[CorrectedContext]):
    """The last event of a run that stops before generation (:meth:`crag.engine.CRAG.retrieve_context`)."""

    name = "context"
    composite = True

    def summary(self) -> Json:
        return shapes.corrected_summary(self.value)

    def trace(self) -> Json:
        return shapes.corrected_record(self.value)


# -- the wire's own events ---------------------------------------------------------------------
@dataclass(frozen=True)
class StartedEvent(Event):
    """The first event of a streamed ``/v1/ask`` (a chat stream's first chunk: the assistant's role)."""

    name = "started"
    question: str
    mode: str
    trace_id: str

    def summary(self) -> Json:
        return {"question": self.question, "mode": self.mode, "trace_id": self.trace_id}

    def chat(self, include_usage: bool) -> list[Json]:
        return [chat_chunk({"role": "assistant", "content": ""})]


@dataclass(frozen=True)
class DoneEvent(Event):
    """The whole answer, last (``answer`` as the wire sends it); a chat stream ends with its citations."""

    name = "done"
    composite = True
    answer: Answer

    def summary(self) -> Json:
        return self.answer.to_dict()

    def chat(self, include_usage: bool) -> list[Json]:
        return shapes.answer_chunks(self.answer, include_usage=include_usage)


@dataclass(frozen=True)
class ErrorEvent(Event):
    """The run failed after the stream began: the HTTP status and error type it would have had."""

    name = "error"
    status: int
    type: str
    message: str

    def summary(self) -> Json:
        return {"status": self.status, "error": {"type": self.type, "message": self.message}}

    def chat(self, include_usage: bool) -> list[Json]:
        return [chat_chunk({}, "error", error={"status": self.status, "type": self.type, "message": self.message})]


STEP_EVENTS: dict[EventName, type[StepEvent[Any]]] = {
    cls.name: cls
    for cls in (
        CondenseEvent, QueryEvent, CacheEvent, RetrieveEvent, EvaluateEvent, DecideEvent, VerifyEvent, EscalateEvent,
        RefineEvent, RewriteEvent, SearchEvent, RefineExternalEvent, RoundsEvent, CorrectEvent, FuseEvent,
        CompressEvent, BearersEvent, AbstainEvent, TokenEvent, ReplaceEvent, GenerateEvent, AnswerEvent, ContextEvent,
    )
}  # fmt: skip
assert set(STEP_EVENTS) == set(EVENT_NAMES), "every event name has one class"


def event_for(name: EventName, value: Any) -> StepEvent[Any]:
    """The event of step ``name`` that returned ``value``."""
    return STEP_EVENTS[name](value)


# -- rendering ---------------------------------------------------------------------------------
class Reducer(Protocol):
    """What turns answer events into the text a client shows (:class:`crag.pipeline.reducer.AnswerText`)."""

    def take(self, event: Event) -> str: ...


@dataclass(frozen=True)
class Rendered:
    """What one event becomes for each reader, each made when first read.

    ``text`` is the answer text the event adds (through the client's reducer: redacted, and
    an answer completes what its tokens did not carry); ``sse`` the server-sent event(s);
    ``chunks`` the OpenAI chunk bodies (without the stream's ``id``, ``created``, ``model``);
    ``record`` the trace keys (``degradations``: items to append).
    """

    event: Event
    text: str = ""
    publish: Callable[[Any], Any] = redact
    include_usage: bool = False

    @cached_property
    def sse(self) -> bytes:
        frames = [_frame("token", {"delta": self.text}, self.publish)] if self.text else []
        if not isinstance(self.event, TokenEvent):  # a token's frame is its text
            wire = self.event.wire()
            frames.append(_frame(wire.name, wire.data, self.publish))
        return b"".join(frames)

    @cached_property
    def chunks(self) -> tuple[Json, ...]:
        text = [chat_chunk({"content": self.text})] if self.text else []
        return tuple(text + self.event.wire().chat(self.include_usage))

    def chat_frames(self, base: Json) -> bytes:
        """``chunks`` as a chat stream sends them: ``data: {base | chunk}`` each."""
        frames = (json.dumps(self.publish(base | c), ensure_ascii=False) for c in self.chunks)
        return b"".join(f"data: {frame}\n\n".encode() for frame in frames)

    @cached_property
    def record(self) -> Json:
        record = self.event.trace()
        notes = self.event.degradations()
        if notes and not self.event.composite:
            record["degradations"] = notes
        return record


def render(
    event: Event, text: Reducer | None = None, *, publish: Callable[[Any], Any] = redact, include_usage: bool = False
) -> Rendered:
    """``event`` as a server-sent event, OpenAI chunks and a trace record (:class:`Rendered`).

    ``text``: the client's reducer; the answer text then goes through it (one per stream).
    ``publish`` cleans JSON on its way out (the server's :func:`crag.server.public.public`;
    default: redaction). ``include_usage``: a chat stream's last chunk counts the tokens.

    >>> render(ErrorEvent(503, "llm_unavailable", "down")).chunks[0]["choices"][0]["finish_reason"]
    'error'
    """
    if text is not None:
        piece = text.take(event)
    else:
        piece = event.value if isinstance(event, TokenEvent) else ""
    return Rendered(event, piece, publish, include_usage)


def _frame(name: str, data: Any, publish: Callable[[Any], Any]) -> bytes:
    """One server-sent event; JSON data on one line so any SSE parser reads it."""
    return f"event: {name}\ndata: {json.dumps(publish(data), ensure_ascii=False)}\n\n".encode()
