"""What the service returns: server-sent events, OpenAI-compatible shapes, error statuses.

Every byte leaves redacted (:mod:`crag.redact`); streamed answer text goes through a
:class:`~crag.redact.StreamRedactor` first (:mod:`crag.server.live`), because a key split
across two events would pass a check of each.

>>> sse("token", {"delta": "Par"})
b'event: token\\ndata: {"delta": "Par"}\\n\\n'
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse

from crag.errors import (
    ApiError,
    BackendError,
    ConfigError,
    CragError,
    DiskFullError,
    DocumentNotFoundError,
    InputError,
    KnowledgeBaseError,
    LLMUnavailableError,
    ModelIntegrityError,
    NoMatchError,
    RequestCancelled,
    StateUnavailableError,
    TraceNotFoundError,
    UnknownBackendError,
    UnsupportedFileError,
)
from crag.server.public import public
from crag.types import Answer

__all__ = [
    "SSEResponse",
    "chat_completion",
    "crag_error_status",
    "crag_meta",
    "sources_text",
    "sse",
    "url_citations",
]

log = logging.getLogger("crag.server")


def crag_error_status(exc: CragError) -> tuple[int, str]:
    """HTTP status and error type for a crag error: the client's fault is 4xx, ours 5xx."""
    table: Sequence[tuple[type[CragError], int, str]] = (
        (TraceNotFoundError, 404, "not_found"),
        (DocumentNotFoundError, 404, "document_not_found"),
        (RequestCancelled, 499, "client_closed_request"),  # nobody reads it; the access log does
        (DiskFullError, 507, "insufficient_storage"),
        (UnknownBackendError, 400, "unknown_backend"),
        (UnsupportedFileError, 415, "unsupported_file"),
        (NoMatchError, 422, "no_matching_documents"),
        (InputError, 400, "invalid_input"),
        (KnowledgeBaseError, 409, "knowledge_base_error"),
        (LLMUnavailableError, 503, "llm_unavailable"),
        (StateUnavailableError, 503, "state_unavailable"),
        (ConfigError, 503, "config_error"),
        (ModelIntegrityError, 503, "model_integrity_error"),
        (BackendError, 502, "backend_error"),
    )
    if isinstance(exc, ApiError):
        return exc.status, exc.type
    for cls, status, name in table:
        if isinstance(exc, cls):
            return status, name
    return 500, "crag_error"


def sse(event: str, data: Any) -> bytes:
    """One server-sent event; JSON data on one line so any SSE parser reads it (secrets redacted)."""
    return f"event: {event}\ndata: {json.dumps(public(data), ensure_ascii=False)}\n\n".encode()


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
        finally:
            # A hang-up cancels the body while it waits to send: close it now (its cleanup
            # stops the model) instead of whenever the garbage collector gets to it.
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:
                await close()


# -- OpenAI-compatible shapes -------------------------------------------------------------
def url_citations(answer: Answer) -> list[dict[str, Any]]:
    """OpenAI ``url_citation`` annotations: one per sentence and source it cites, with the
    sentence's start and end index in the message content (the answer text).

    >>> from crag.types import Action, Citation
    >>> a = Answer("Q", "It opened in 1901[1].", Action.CORRECT, 0.9,
    ...            [Citation(1, "a.md", "Museum", "", "…", quote="It opened in 1901.", spans=[(0, 21)])], [], "t", {})
    >>> url_citations(a)[0]["url_citation"]
    {'url': 'a.md', 'title': 'Museum', 'start_index': 0, 'end_index': 21}
    """
    out = []
    for c in answer.citations:
        for start, end in c.spans:
            where = {"url": c.url or c.source, "title": c.title or c.source, "start_index": start, "end_index": end}
            out.append({"type": "url_citation", "url_citation": where})
    return sorted(out, key=lambda a: (a["url_citation"]["start_index"], a["url_citation"]["url"]))


def sources_text(answer: Answer) -> str:
    """``"\\n\\nSources:\\n[1] title url…"`` for the answer's citations ("" without any)."""
    if not answer.citations:
        return ""
    lines = [f"[{c.id}] {' '.join(p for p in (c.title, c.url or c.source) if p)}" for c in answer.citations]
    return "\n\nSources:\n" + "\n".join(lines)


def crag_meta(answer: Answer) -> dict[str, Any]:
    """crag's own fields beside an OpenAI reply: the decision, and each citation with its quote."""
    cited = [
        {"id": c.id, "title": c.title, "url": c.url, "source": c.source, "quote": c.quote, "inferred": c.inferred}
        for c in answer.citations
    ]
    return {
        "trace_id": answer.trace_id,
        "action": answer.action.value,
        "confidence": answer.confidence,
        "refused": answer.refused,
        "citations": cited,
    } | ({"cache": answer.cache} if answer.cache is not None else {})


def chat_completion(answer: Answer, model: str, usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{answer.trace_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.answer, "annotations": url_citations(answer)},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage,
        "crag": crag_meta(answer),
    }
