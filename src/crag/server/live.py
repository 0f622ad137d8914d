"""Streamed answers over HTTP: ``/v1/ask`` events and OpenAI chat chunks as the model writes.

Both read one :class:`~crag.pipeline.live.AnswerStream` (the engine's run in a worker
thread) with ``async for``: the event loop awaits each event and the worker wakes it, so no
threadpool thread waits and nothing polls. A client that hangs up cancels that wait at once,
and the stream is closed, which stops the model between two tokens and frees it for the next
request. Answer text leaves through the one reducer every
client uses (:class:`~crag.pipeline.reducer.AnswerText`, which redacts across events), and
every event becomes bytes through :func:`crag.pipeline.events.render`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio

from crag.errors import CragError
from crag.pipeline.events import (
    AbstainEvent,
    AnswerEvent,
    ErrorEvent,
    GenerateEvent,
    ReplaceEvent,
    StartedEvent,
    StepEvent,
    TokenEvent,
    render,
)
from crag.pipeline.live import AnswerStream
from crag.pipeline.reducer import AnswerText
from crag.server.metrics import Metrics
from crag.server.public import public
from crag.server.stream import crag_error_status
from crag.types import Answer

__all__ = ["ask_events", "chat_events", "final_answer", "first_events", "live_events"]

KEEPALIVE_SECONDS = 10.0  # SSE comment interval while nothing happens (proxies drop idle streams)
# Events after which a chat stream has something to send (an error before them is an HTTP status).
_CHAT_START = (TokenEvent, ReplaceEvent, GenerateEvent, AbstainEvent, AnswerEvent)
StreamEvent = StepEvent[Any]


async def live_events(stream: AnswerStream, keepalive: float | None = None) -> AsyncGenerator[StreamEvent | None, None]:
    """The stream's events, ``None`` every ``keepalive`` idle seconds; closes the stream on the way out."""
    keepalive = KEEPALIVE_SECONDS if keepalive is None else keepalive
    try:
        while True:
            with anyio.move_on_after(keepalive) as idle:  # cancelling the wait loses no event
                try:
                    event = await anext(stream)
                except StopAsyncIteration:
                    return
            yield None if idle.cancelled_caught else event
    finally:
        stream.close()  # a no-op after the end; after a hang-up it stops the model


async def ask_events(
    stream: AnswerStream, metrics: Metrics, question: str, mode: str, keepalive: float | None = None
) -> AsyncIterator[bytes]:
    """SSE for ``POST /v1/ask`` with ``stream=true``: ``started``, the step events as they happen,
    ``token`` events (verified sentences: joined, they are the answer), the ``generate`` event
    (citations with their quotes, usage), then ``done`` with the whole answer, or ``error``."""
    yield render(StartedEvent(question, mode, stream.trace_id), publish=public).sse
    text = AnswerText()
    events = live_events(stream, keepalive)
    ended = False  # the answer or an error was sent; else the client left first
    try:
        async for event in events:
            if event is None:
                yield b": keep-alive\n\n"
                continue
            if isinstance(event, AnswerEvent):
                ended = True
                metrics.answer(event.value)
            if frames := render(event, text, publish=public).sse:  # the answer is sent as ``done``
                yield frames
    except CragError as exc:
        ended = True
        status, type_ = crag_error_status(exc)
        metrics.failed(exc)
        yield render(ErrorEvent(status, type_, str(exc)), publish=public).sse
    finally:
        if not ended:
            metrics.cancelled()
        await events.aclose()


async def first_events(events: AsyncGenerator[StreamEvent | None, None]) -> list[StreamEvent]:
    """Read events until the answer starts (its first token, or the end of a run without one).

    A chat stream waits for this before it answers: an error of the run until then (the
    model unreachable, the budget spent) still reaches the client as an HTTP status.
    """
    seen: list[StreamEvent] = []
    async for event in events:
        if event is not None:
            seen.append(event)
            if isinstance(event, _CHAT_START):
                break
    return seen


async def final_answer(events: AsyncGenerator[StreamEvent | None, None]) -> Answer:
    """Read events to the end of the run; its :class:`Answer` (a failed run raises its error)."""
    async for event in events:
        if isinstance(event, AnswerEvent):
            return event.value
    raise RuntimeError("the run ended without an answer")  # pragma: no cover - a run ends with one or raises


async def chat_events(
    first: list[StreamEvent],
    events: AsyncGenerator[StreamEvent | None, None],
    metrics: Metrics,
    model: str,
    started: StartedEvent,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """``chat.completion.chunk`` events: ``delta.content`` per verified sentence, then a final
    chunk with ``finish_reason`` and the citations as ``delta.annotations`` (``url_citation``,
    indexed into the content), and ``usage`` when asked.

    The content is the saved answer, exactly: the pipeline streams only text that passed
    its checks, so nothing shown is ever taken back.
    """
    base = _chunk_base(started.trace_id, model)
    yield render(started, publish=public).chat_frames(base)  # the assistant's role
    text = AnswerText()
    ended = False  # the answer or an error came; else the client left first
    try:
        async for event in _after(first, events):
            if event is None:
                yield b": keep-alive\n\n"
                continue
            if isinstance(event, AnswerEvent):
                ended = True
                metrics.answer(event.value)
            # text as it is verified; with the answer, its citations (and the usage when asked)
            if frames := render(event, text, publish=public, include_usage=include_usage).chat_frames(base):
                yield frames
    except CragError as exc:
        ended = True
        status, type_ = crag_error_status(exc)
        metrics.failed(exc)
        yield render(ErrorEvent(status, type_, str(exc)), publish=public).chat_frames(base)
    finally:
        if not ended:
            metrics.cancelled()
        await events.aclose()
    if ended:
        yield b"data: [DONE]\n\n"


def _chunk_base(trace_id: str, model: str) -> dict[str, Any]:
    """The fields every ``chat.completion.chunk`` of one answer shares."""
    return {
        "id": f"chatcmpl-{trace_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }


async def _after(
    first: list[StreamEvent], events: AsyncGenerator[StreamEvent | None, None]
) -> AsyncIterator[StreamEvent | None]:
    """The events read before the response started (:func:`first_events`), then the rest."""
    for seen in first:
        yield seen
    async for event in events:
        yield event
