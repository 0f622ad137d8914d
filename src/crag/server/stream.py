"""What the service streams and returns: server-sent events and OpenAI-compatible shapes.

Every byte leaves redacted (:mod:`crag.redact`); a text is redacted whole before it is cut
into events, because a key split across two events would pass each check.

>>> chunk_text("the answer is here", 8)
['the ', 'answer ', 'is here']
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse

from crag.redact import redact, redact_text
from crag.types import Answer

__all__ = [
    "ANSWER_CHUNK_CHARS",
    "SSEResponse",
    "chat_chunks",
    "chat_completion",
    "chunk_text",
    "crag_meta",
    "sse",
    "stage_events",
    "with_sources",
]

log = logging.getLogger("crag.server")
ANSWER_CHUNK_CHARS = 24  # the pipeline returns the whole answer; streamed in pieces of this size


def stage_events(answer: Answer, trace: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The pipeline stages as (event, data) pairs: retrieved, graded, action, searching, context."""
    t = trace or {}
    events: list[tuple[str, Any]] = []
    retrieved = [r for r in t.get("retrieved") or [] if isinstance(r, dict)]
    if retrieved:
        keep = ("id", "title", "source", "url", "score", "rank")
        events.append(("retrieved", {"documents": [{k: r.get(k) for k in keep} for r in retrieved]}))
    if t.get("grades"):
        events.append(
            (
                "graded",
                {"grades": t["grades"], "confidence": answer.confidence, "evaluator": t.get("evaluator")},
            )
        )
    events.append(
        (
            "action",
            {
                "action": answer.action.value,
                "confidence": answer.confidence,
                "thresholds": t.get("thresholds"),
            },
        )
    )
    if answer.queries:
        external = [r for r in t.get("external") or [] if isinstance(r, dict)]
        results = [{k: r.get(k) for k in ("title", "url", "provider", "query")} for r in external]
        events.append(("searching", {"queries": answer.queries, "results": results}))
    events.append(("context", {"items": answer.to_dict()["context"], "degradations": answer.degradations}))
    return events


def chunk_text(text: str, size: int) -> list[str]:
    """``text`` in pieces of about ``size`` characters, split after spaces where possible."""
    pieces: list[str] = []
    while text:
        cut = len(text) if len(text) <= size else (text.rfind(" ", 0, size) + 1 or size)
        pieces.append(text[:cut])
        text = text[cut:]
    return pieces


def sse(event: str, data: Any) -> bytes:
    """One server-sent event; JSON data on one line so any SSE parser reads it (secrets redacted)."""
    return f"event: {event}\ndata: {json.dumps(redact(data), ensure_ascii=False)}\n\n".encode()


class SSEResponse(StreamingResponse):
    """A ``text/event-stream`` response that treats a vanished client as normal."""

    def __init__(self, content: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> None:
        base = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(content, media_type="text/event-stream", headers=base | (headers or {}))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (ClientDisconnect, OSError):
            log.info("client disconnected mid-stream")


# -- OpenAI-compatible shapes -------------------------------------------------------------
def with_sources(answer: Answer) -> str:
    """The answer text with its citations appended as a ``Sources:`` list."""
    if not answer.citations:
        return answer.answer
    lines = [f"[{c.id}] {' '.join(p for p in (c.title, c.url or c.source) if p)}" for c in answer.citations]
    return answer.answer + "\n\nSources:\n" + "\n".join(lines)


def crag_meta(answer: Answer) -> dict[str, Any]:
    return {"trace_id": answer.trace_id, "action": answer.action.value, "confidence": answer.confidence}


def chat_completion(answer: Answer, model: str, usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{answer.trace_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": with_sources(answer)},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage,
        "crag": crag_meta(answer),
    }


async def chat_chunks(answer: Answer, model: str, usage: dict[str, int] | None) -> AsyncIterator[bytes]:
    base = {
        "id": f"chatcmpl-{answer.trace_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = (
            base
            | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
            | extra
        )
        return f"data: {json.dumps(redact(body), ensure_ascii=False)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    # Redacted whole before it is cut, as in /v1/ask streams.
    for piece in chunk_text(redact_text(with_sources(answer)), ANSWER_CHUNK_CHARS):
        yield chunk({"content": piece})
    yield chunk({}, "stop", crag=crag_meta(answer))
    if usage is not None:
        yield f"data: {json.dumps(base | {'choices': [], 'usage': usage})}\n\n".encode()
    yield b"data: [DONE]\n\n"
