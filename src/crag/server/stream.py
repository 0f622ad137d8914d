"""What the service returns: the streaming response, OpenAI-compatible shapes, error statuses.

Every byte leaves redacted (:mod:`crag.redact`) and published (:mod:`crag.server.public`).
The events of a streamed answer become bytes in one place, :func:`crag.pipeline.events.render`
(:mod:`crag.server.live` passes it :func:`~crag.server.public.public`); this module holds
the response that carries them and the non-streamed OpenAI reply, which shares its
citations and crag's fields with the stream's last chunk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse

from crag.errors import (
    ApiError,
    BackendError,
    BudgetExceeded,
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
from crag.pipeline.event_shapes import crag_meta, url_citations
from crag.types import Answer

__all__ = [
    "SSEResponse",
    "chat_completion",
    "crag_error_status",
    "crag_meta",
    "sources_text",
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
        # A spent budget is the caller's quota, not a failure: 429, as OpenAI's insufficient_quota.
        (BudgetExceeded, 429, "budget_exceeded"),
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
def sources_text(answer: Answer) -> str:
    """``"\\n\\nSources:\\n[1] title url…"`` for the answer's citations ("" without any)."""
    if not answer.citations:
        return ""
    lines = [f"[{c.id}] {' '.join(p for p in (c.title, c.url or c.source) if p)}" for c in answer.citations]
    return "\n\nSources:\n" + "\n".join(lines)


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
