"""The answer routes: ``/v1/ask`` (JSON or SSE) and OpenAI-compatible ``/v1/chat/completions``.

Every engine call runs in the threadpool: the engine blocks (embeddings, SQLite, a local
model behind a lock), and the event loop must stay free for health checks and keep-alives.

Every answer, streamed or not, is a run the server can stop (:class:`~crag.pipeline.live.AnswerStream`):
a client that hangs up closes it (:mod:`crag.server.hangup` before the response starts, the
streamed response itself afterwards), so the model stops at its next piece and the next
request gets it. The trace says ``cancelled``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import Receive

from crag.errors import ApiError, CragError
from crag.pipeline.events import StartedEvent
from crag.pipeline.live import AnswerStream
from crag.request import Request as CragRequest
from crag.request import RequestOptions
from crag.server.body import parse_body
from crag.server.collections import Collection, Collections, chat_model, collection_for
from crag.server.hangup import stop_on_hangup
from crag.server.live import KEEPALIVE_SECONDS, ask_events, chat_events, final_answer, first_events, live_events
from crag.server.metrics import Metrics
from crag.server.policy import check_search_choice
from crag.server.schemas import AskRequest, ChatRequest, RedactedJSONResponse
from crag.server.stream import SSEResponse, chat_completion
from crag.types import Answer

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["answer_question", "install", "request_of"]


def install(app: FastAPI, collections: Collections, metrics: Metrics) -> None:
    """Add ``POST /v1/ask`` and ``POST /v1/chat/completions`` to ``app``."""

    @app.post("/v1/ask", response_model=None)
    async def ask(request: Request) -> Response:
        req = await parse_body(request, AskRequest)
        col = collection_for(request, collections, req.collection)
        history = [m.model_dump() for m in req.history or []]
        ask = request_of(
            metrics,
            col,
            req.question,
            history=history,
            mode=req.mode,
            search=req.search,
            filters=req.filters,
            no_cache=req.no_cache,
        )
        if req.stream:
            stream = await _start_stream(col, ask, metrics)
            events = ask_events(stream, metrics, ask.question, ask.mode, KEEPALIVE_SECONDS)
            return SSEResponse(events, headers={"X-Trace-Id": stream.trace_id})
        answer = await answer_question(col, ask, metrics, receive=request.receive)
        return RedactedJSONResponse(answer.to_dict(), headers={"X-Trace-Id": answer.trace_id})

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Response:
        req = await parse_body(request, ChatRequest)
        _check_chat(req)
        question, history = req.conversation()  # the last user message, and the turns before it
        col, mode = chat_model(collections, req.model, request)
        ask = request_of(metrics, col, question, history=history, mode=mode, filters=req.filters, no_cache=req.no_cache)
        if req.stream:
            return await _chat_stream(request, req, col, ask, metrics)
        answer = await answer_question(col, ask, metrics, receive=request.receive)
        return RedactedJSONResponse(
            chat_completion(answer, req.model, _usage(answer)), headers={"X-Trace-Id": answer.trace_id}
        )


async def _chat_stream(
    request: Request, req: ChatRequest, col: Collection, ask: CragRequest, metrics: Metrics
) -> SSEResponse:
    """The chat answer as ``chat.completion.chunk`` events, tokens as the model writes them.

    The response starts at the first token, so an error before it (503 model unavailable, 409 no
    knowledge base) still reaches OpenAI clients as an HTTP status instead of a broken stream.
    Until then nothing else notices a client that hangs up: the run is closed here.
    """
    stream = await _start_stream(col, ask, metrics)
    events = live_events(stream, KEEPALIVE_SECONDS)
    try:
        async with stop_on_hangup(request.receive, stream.close):
            first = await first_events(events)
    except BaseException as exc:
        await events.aclose()
        if isinstance(exc, CragError):
            metrics.failed(exc)
        raise
    include_usage = bool((req.stream_options or {}).get("include_usage"))
    started = StartedEvent(ask.question, ask.mode, stream.trace_id)
    body = chat_events(first, events, metrics, req.model, started, include_usage)
    return SSEResponse(body, headers={"X-Trace-Id": stream.trace_id})


def _check_chat(req: ChatRequest) -> None:
    """400 in OpenAI's shape for a parameter crag cannot honour, or a request without a question."""
    refused = req.unsupported()
    if refused is not None:
        name, why = refused
        raise ApiError(400, "invalid_request_error", f"{name}: {why}", param=name, code="unsupported_parameter")
    user = req.last_user()
    if user is None:
        raise ApiError(
            400,
            "invalid_request_error",
            "messages has no user message; the last user message is the question",
            param="messages",
        )
    if not user.text().strip():
        others = user.other_parts()
        unread = f" (crag reads only text parts, not {', '.join(others)})" if others else ""
        raise ApiError(
            400,
            "invalid_request_error",
            f"the last user message has no text{unread}; put the question in it",
            param="messages",
        )


# -- running questions ------------------------------------------------------------------
def request_of(metrics: Metrics, col: Collection, question: str, **options: Unpack[RequestOptions]) -> CragRequest:
    """The request an HTTP client sent (``via`` http, in ``col``); bad input counts as a failure."""
    try:
        asked: RequestOptions = {**options, "via": "http", "collection": col.name}
        return CragRequest.of(question, **asked)
    except CragError as exc:
        metrics.failed(exc)
        raise


async def answer_question(
    col: Collection, ask: CragRequest, metrics: Metrics, *, receive: Receive | None = None
) -> Answer:
    """Answer ``ask`` whole; with the request's ``receive``, a client that hangs up stops the run.

    The run is the same streamed run the SSE routes read (the answer is the same, character for
    character), because only a streamed run can be stopped between two pieces of the model.
    """
    stream = await _start_stream(col, ask, metrics)
    events = live_events(stream)
    try:
        if receive is None:
            answer = await final_answer(events)
        else:
            async with stop_on_hangup(receive, stream.close):
                answer = await final_answer(events)
    except CragError as exc:
        metrics.failed(exc)
        raise
    finally:
        await events.aclose()
    metrics.answer(answer)
    return answer


async def _start_stream(col: Collection, ask: CragRequest, metrics: Metrics) -> AnswerStream:
    """Start a run; a refused search and a missing knowledge base fail here, as HTTP errors."""
    engine = col.engine
    check_search_choice(engine.settings, ask.search)  # 403 before anything is built or called

    def start() -> AnswerStream:
        engine.check_state()  # a shared state database that is down: 503 now, not an unrecorded answer
        return engine.ask_stream(ask)

    try:
        return await run_in_threadpool(start)
    except CragError as exc:
        metrics.failed(exc)
        raise


def _usage(answer: Answer) -> dict[str, int]:
    """OpenAI's ``usage``: every LLM call of the request, as the answer carries it."""
    u = answer.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}
