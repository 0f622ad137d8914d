"""HTTP request and response shapes (pydantic lives only at this edge, see STYLE §2).

Request models forbid unknown fields and use strict types, so ``{"question": 1}`` or a
typo like ``{"qestion": ...}`` is a 422 naming the field rather than a silent default.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.responses import JSONResponse

from crag.server.public import public

__all__ = [
    "AskRequest",
    "ChatMessage",
    "ChatRequest",
    "ContentPart",
    "HistoryMessage",
    "IngestDocument",
    "IngestRequest",
    "RedactedJSONResponse",
    "error_response",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HistoryMessage(_Strict):
    """One earlier turn of a conversation (``/v1/ask``'s ``history``)."""

    role: Literal["user", "assistant"]
    content: StrictStr


class AskRequest(_Strict):
    """Body of ``POST /v1/ask``.

    ``history``: the conversation before the question; the question is condensed into a
    standalone one from it before retrieval.

    >>> AskRequest.model_validate({"question": "What is CRAG?", "stream": True}).mode
    'crag'
    """

    question: StrictStr
    history: list[HistoryMessage] | None = Field(None, max_length=200)
    mode: Literal["crag", "rag"] = "crag"
    # Only a provider *name*: a corpus path from the network would let clients read server files.
    search: StrictStr | None = Field(None, max_length=64)
    stream: StrictBool = False
    collection: StrictStr | None = Field(None, max_length=64)
    # Metadata the documents must match: {"lang": "zh"}, {"team": ["a", "b"]} (crag.metadata).
    filters: dict[str, Any] | None = None
    no_cache: StrictBool = False  # answer anew even when the answer cache holds a valid answer


class ContentPart(BaseModel):
    """One part of a multi-part OpenAI message; only ``text`` parts carry the question."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr | None = None


class ChatMessage(BaseModel):
    """An OpenAI chat message. Extra keys (``name``, ``tool_calls``...) are tolerated as SDKs send them."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: StrictStr | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text (the text parts of a multi-part message, joined)."""
        if isinstance(self.content, list):
            return "\n".join(p.text or "" for p in self.content if p.type == "text")
        return self.content or ""

    def other_parts(self) -> list[str]:
        """The types of the parts that carry no text (``image_url``, ``input_audio``...), in order."""
        if not isinstance(self.content, list):
            return []
        return list(dict.fromkeys(p.type for p in self.content if p.type != "text"))


class ChatRequest(_Strict):
    """Body of ``POST /v1/chat/completions`` (OpenAI-compatible).

    Sampling parameters are accepted so stock clients work, but the CRAG settings of
    the server decide generation; ``model="rag"`` runs the plain baseline. The last user
    message is the question; the user and assistant messages before it are its history.
    OpenAI parameters that would change what the reply is (tools, JSON output, several
    choices, log probabilities) are accepted here and refused by :meth:`unsupported` with
    their name, rather than as unknown fields; their neutral values (``tools: []``,
    ``tool_choice: "auto"``, ``logprobs: false``...) pass, as some clients always send them.
    """

    model: StrictStr = "crag"
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool = False
    temperature: StrictFloat | StrictInt | None = None
    top_p: StrictFloat | StrictInt | None = None
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None
    n: StrictInt | None = None
    stop: StrictStr | list[StrictStr] | None = None
    user: StrictStr | None = None
    seed: StrictInt | None = None
    presence_penalty: StrictFloat | StrictInt | None = None
    frequency_penalty: StrictFloat | StrictInt | None = None
    logit_bias: dict[str, Any] | None = None
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: StrictStr | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    modalities: list[StrictStr] | None = None
    reasoning_effort: StrictStr | None = None
    service_tier: StrictStr | None = None
    store: StrictBool | None = None
    stream_options: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    filters: dict[str, Any] | None = None  # crag's extension: as in /v1/ask
    no_cache: StrictBool = False  # crag's extension: as in /v1/ask

    def unsupported(self) -> tuple[str, str] | None:
        """The first parameter whose value crag cannot honour, and what to send instead.

        >>> ChatRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], "n": 3}).unsupported()[0]
        'n'
        """
        fmt = (self.response_format or {}).get("type", "text")
        checks = (
            ("n", self.n not in (None, 1), "crag writes one answer per request; send n=1 or leave n out"),
            ("tools", bool(self.tools), "crag answers from its knowledge base and calls no tools; leave tools out"),
            ("functions", bool(self.functions), "crag calls no functions; leave functions out"),
            ("tool_choice", self.tool_choice not in (None, "none", "auto"), 'crag calls no tools; send "none"'),
            ("function_call", self.function_call not in (None, "none", "auto"), 'crag calls no functions; send "none"'),
            ("response_format", fmt != "text", f"crag answers in prose with citations, not {fmt!r}; leave it out"),
            ("logprobs", bool(self.logprobs), "crag returns no log probabilities; send false or leave logprobs out"),
            ("top_logprobs", bool(self.top_logprobs), "crag returns no log probabilities; leave top_logprobs out"),
            ("modalities", any(m != "text" for m in self.modalities or ()), 'crag answers in text; send ["text"]'),
        )
        return next(((name, why) for name, bad, why in checks if bad), None)

    def last_user(self) -> ChatMessage | None:
        """The last user message (the question), or None when there is none."""
        return next((m for m in reversed(self.messages) if m.role == "user"), None)

    def conversation(self) -> tuple[str, list[dict[str, str]]]:
        """The question (the last user message) and the user/assistant messages before it."""
        last = max((i for i, m in enumerate(self.messages) if m.role == "user"), default=-1)
        if last < 0:
            return "", []
        turns = [m for m in self.messages[:last] if m.role in ("user", "assistant")]
        return self.messages[last].text(), [{"role": m.role, "content": m.text()} for m in turns]


class IngestDocument(_Strict):
    """One document of a JSON ingest request; written as one JSONL line."""

    text: StrictStr = Field(min_length=1)
    title: StrictStr | None = None
    url: StrictStr | None = None
    metadata: dict[str, Any] | None = None


class IngestRequest(_Strict):
    """Body of a JSON ``POST /v1/ingest``: its documents are stored as one crag document.

    ``id`` names it: a later request with the same ``id`` replaces it. Without one it is named
    by its content, so a retry never stores a second copy. ``metadata`` becomes the
    document's metadata (a line's own ``metadata`` wins a clash); without it a replaced
    document keeps the metadata it had, and ``clear_metadata`` removes it.
    """

    documents: list[IngestDocument] = Field(min_length=1, max_length=10_000)
    collection: StrictStr | None = Field(None, max_length=64)
    id: StrictStr | None = Field(None, min_length=1, max_length=128)
    metadata: dict[str, Any] | None = None
    clear_metadata: StrictBool = False


def error_response(
    status: int, type_: str, message: str, headers: dict[str, str] | None = None, **extra: str | None
) -> JSONResponse:
    """The one error shape of the API: ``{"error": {"type", "message"}}`` (OpenAI-compatible).

    ``extra`` adds OpenAI's optional fields when given (``param``, ``code``). Messages pass
    through :func:`crag.redact.redact_text` so an exception that quotes a URL with a key in
    it never sends the key to a client.
    """
    body = {"error": {"type": type_, "message": str(message), **{k: v for k, v in extra.items() if v is not None}}}
    return RedactedJSONResponse(body, status_code=status, headers=headers)


class RedactedJSONResponse(JSONResponse):
    """The JSON response of every route: content passes through :func:`crag.redact.redact` first,
    then loses the server's paths (:func:`crag.server.public.public`).

    >>> RedactedJSONResponse({"e": "Authorization: Bearer abc123def456"}).body
    b'{"e":"Authorization: ***"}'
    """

    def render(self, content: Any) -> bytes:
        return super().render(public(content))
