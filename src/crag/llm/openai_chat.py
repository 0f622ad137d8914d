"""Chat completions from any OpenAI-compatible server.

One request shape, ``POST {base_url}/chat/completions``, serves OpenAI, DeepSeek,
Qwen/DashScope (compatible mode), vLLM, Ollama (``/v1``), the llama.cpp server and
``python -m llama_cpp.server``. JSON output is requested with
``response_format={"type": "json_object"}``, the form all of them accept; the schema
itself travels in the prompt (and as ``json_schema`` for api.openai.com, which
understands it).

The API key is needed only for non-local hosts. It is held as a ``SecretStr`` and
never appears in ``repr`` or error messages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import SecretStr

from crag.config import secret_from_env
from crag.errors import LLMError, LLMUnavailableError
from crag.http import is_local_url, request_json
from crag.protocols import Completion
from crag.registry import BackendDeps, Registries

if TYPE_CHECKING:
    from crag.config import CragSettings

BACKEND_ID = "openai"
# Hosts known to accept {"type": "json_schema", ...}; others get the portable json_object.
_JSON_SCHEMA_HOSTS = frozenset({"api.openai.com"})


class OpenAIChatLLM:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``retries`` counts extra attempts after a connection failure, timeout, 429 or 5xx.
    An endpoint that stays unreachable raises ``LLMUnavailableError``; any other
    failure raises ``LLMError``.

    ### Usage example
    >>> import httpx
    >>> def handler(request: httpx.Request) -> httpx.Response:
    ...     return httpx.Response(200, json={
    ...         "model": "qwen", "choices": [{"message": {"role": "assistant", "content": "Hi!"}}],
    ...         "usage": {"prompt_tokens": 9, "completion_tokens": 2}})
    >>> llm = OpenAIChatLLM("http://127.0.0.1:8080/v1", "qwen",
    ...                     client=httpx.Client(transport=httpx.MockTransport(handler)))
    >>> llm.complete([{"role": "user", "content": "Say hi."}]).text
    'Hi!'
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120,
        retries: int = 1,
        client: httpx.Client | None = None,
        api_key_env: str = "",
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required, e.g. http://127.0.0.1:8080/v1")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_id = f"openai:{model}"
        self.timeout = timeout
        self.retries = retries
        self._api_key = SecretStr(api_key) if api_key else None
        self._api_key_env = api_key_env  # only to name the variable in error messages
        self._client = client
        self._owns_client = client is None

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIChatLLM(base_url={self.base_url!r}, model={self.model!r})"

    def warm_up(self) -> None:
        """Open the connection pool (no request is sent)."""
        if self._client is None:
            self._client = httpx.Client()

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Send one chat completion request and return the first choice."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is not None:
            body["messages"] = _with_json_instruction(body["messages"], json_schema)
            body["response_format"] = self._response_format(json_schema)
        headers = {"Content-Type": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        self.warm_up()
        assert self._client is not None
        url = f"{self.base_url}/chat/completions"
        try:
            payload = request_json(
                self._client,
                "POST",
                url,
                error=LLMError,
                backend_id=BACKEND_ID,
                step="complete",
                retries=self.retries,
                timeout=self.timeout,
                json=body,
                headers=headers,
            )
        except LLMError as exc:
            raise self._classify(exc) from None
        return self._parse(payload)

    # -- internals ---------------------------------------------------------------------------

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        if httpx.URL(self.base_url).host in _JSON_SCHEMA_HOSTS:
            return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
        return {"type": "json_object"}

    def _classify(self, exc: LLMError) -> LLMError:
        msg = str(exc)
        # request_json says "failed after N attempt(s)" only when every attempt hit a
        # transport failure, a timeout or a retryable status: the endpoint is unavailable.
        if "failed after" in msg:
            return LLMUnavailableError(f"{msg} (llm.base_url = {self.base_url})", backend_id=BACKEND_ID, step=exc.step)
        if "check the API key" in msg and self._api_key_env:
            return LLMError(
                f"{msg} in the environment variable {self._api_key_env}",
                backend_id=BACKEND_ID,
                step=exc.step,
            )
        return exc

    def _parse(self, payload: Any) -> Completion:
        try:
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
            usage = payload.get("usage") or {}
            return Completion(
                text=text.strip(),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                model=str(payload.get("model") or self.model),
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            raise LLMError(
                f"{BACKEND_ID}: malformed response from {self.base_url}/chat/completions (no choices[0]."
                "message); check that llm.base_url points at an OpenAI-compatible chat server",
                backend_id=BACKEND_ID,
                step="complete",
            ) from None


def _with_json_instruction(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Add the schema to the prompt unless the caller already asks for JSON.

    json_object mode does not enforce a schema, and OpenAI rejects it unless a message
    mentions JSON, so the instruction is needed for both.
    """
    if any("json" in str(m.get("content", "")).lower() for m in messages):
        return messages
    note = "Reply with a single JSON object that follows this JSON schema: " + json.dumps(
        schema, ensure_ascii=False, separators=(",", ":")
    )
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content', '')}\n\n{note}".strip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _make(settings: CragSettings, deps: BackendDeps) -> OpenAIChatLLM:
    s = settings.llm
    var = s.api_key_env
    if is_local_url(s.base_url):
        # Local servers (llama.cpp, vLLM, Ollama) usually need no key; send one if set.
        key: str | None = os.environ.get(var, "").strip() if var else None
    else:
        key = secret_from_env(var, what=f"llm backend openai ({s.base_url})").get_secret_value()
    return OpenAIChatLLM(
        s.base_url,
        s.model,
        api_key=key or None,
        timeout=s.timeout,
        retries=s.retries,
        client=deps.client,
        api_key_env=var,
    )


def register(registries: Registries) -> None:
    """Plugin entry point: the ``openai`` (``openai-compatible``) chat LLM."""
    registries.llms.register("openai", _make, aliases=("openai-compatible",))
