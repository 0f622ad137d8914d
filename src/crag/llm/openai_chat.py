"""Chat completions from any OpenAI-compatible server.

One request shape, ``POST {base_url}/chat/completions``, serves OpenAI, DeepSeek,
Qwen/DashScope (compatible mode), vLLM, Ollama (``/v1``), the llama.cpp server and
``python -m llama_cpp.server``. JSON output is requested with
``response_format={"type": "json_object"}``, the form all of them accept; the schema
itself travels in the prompt (and as ``json_schema`` for api.openai.com, which
understands it). ``stream`` reads the same endpoint's server-sent events (``stream=true``).
``yes_probability`` asks for one token with ``logprobs`` / ``top_logprobs`` (OpenAI, vLLM,
llama.cpp's servers), so the Correct-path check (:mod:`crag.correct.verify`) works on a
hosted model too; a server that returns no log-probabilities is told apart once.

The API key is needed only for non-local hosts. It is held as a ``SecretStr`` and
never appears in ``repr`` or error messages.

Servers apply the chat template to the messages and most (vLLM, llama.cpp's servers) then
parse special tokens in the whole prompt, message text included: a passage holding
``<|im_end|><|im_start|>assistant`` would end its turn there. So every message's text is
sent with chat-template control tokens defused (:func:`crag.normalize.defuse_tokens`), for
every prompt: the generator's, and the grader's, the Correct-path check's and the
condenser's, which quote documents and conversations as they are.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import httpx
import httpx_sse
from pydantic import SecretStr

from crag.config import secret_from_env
from crag.deadline import call_time_left
from crag.errors import LLMError, LLMUnavailableError
from crag.http import RETRY_STATUS, is_local_url, request_json
from crag.normalize import defuse_tokens
from crag.protocols import Completion, TokenStream
from crag.redact import clip
from crag.registry import BackendDeps, Registries

if TYPE_CHECKING:
    from crag.config import CragSettings

BACKEND_ID = "openai"
# Hosts known to accept {"type": "json_schema", ...}; others get the portable json_object.
_JSON_SCHEMA_HOSTS = frozenset({"api.openai.com"})
# OpenAI's ceiling for top_logprobs; yes/no spellings of a yes/no prompt sit far above it.
TOP_LOGPROBS = 20


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
        self._no_logprobs = ""  # set once the server has answered without log-probabilities

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
            "messages": _outgoing(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if json_schema is not None:
            body["messages"] = _with_json_instruction(body["messages"], json_schema)
            body["response_format"] = self._response_format(json_schema)
        return self._parse(self._post(body, "complete"))

    def yes_probability(self, messages: Sequence[dict[str, str]]) -> float:
        """P("yes") / (P("yes") + P("no")) for the first reply token, from the server's logprobs.

        One request for one token with ``logprobs`` and ``top_logprobs``; the spellings of
        yes and of no (any case, with or without a space) are summed. An answer the top
        list leaves out is bounded by the least likely listed token. A server that sends
        no log-probabilities raises ``LLMError`` now and on every later call, without a
        request (the caller keeps its decision and records why).
        """
        if self._no_logprobs:
            raise LLMError(self._no_logprobs, backend_id=BACKEND_ID, step="yes_probability")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _outgoing(messages),
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
        }
        url = f"{self.base_url}/chat/completions"
        tops = _first_token_logprobs(self._post(body, "yes_probability"))
        if tops is None:
            self._no_logprobs = (
                f"{BACKEND_ID}: {url} returned no token log-probabilities (logprobs=true); "
                "this server cannot score yes/no answers"
            )
            raise LLMError(self._no_logprobs, backend_id=BACKEND_ID, step="yes_probability")
        return _yes_share(tops, url)

    def stream(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> TokenStream:
        """Yield the reply's text deltas from the server's event stream; return the :class:`Completion`.

        A connection failure, timeout, 429 or 5xx before the first delta is retried like
        ``complete``; once text has been handed on, a broken, garbled or truncated stream
        raises ``LLMError`` (a retry would repeat text the caller already has). ``timeout``
        bounds the wait for each piece, not the whole reply. Closing the generator closes
        the connection, which stops a server that watches for it.
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _outgoing(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},  # ignored by servers that do not know it
        }
        self.warm_up()
        url = f"{self.base_url}/chat/completions"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(0.5 * (2 ** (attempt - 1)))
            outcome = yield from self._stream_once(body, url)
            if isinstance(outcome, Completion):
                return outcome
            last = outcome
        raise LLMUnavailableError(
            f"{BACKEND_ID}: POST {url} failed after {self.retries + 1} attempt(s): {last}; check that the "
            f"server is running and reachable (llm.base_url = {self.base_url})",
            backend_id=BACKEND_ID,
            step="stream",
        )

    def _stream_once(self, body: dict[str, Any], url: str) -> Generator[str, None, Completion | str]:
        """One attempt at the stream: yield its deltas, return the :class:`Completion`, or return
        why it may be retried (a failure before any text was handed on)."""
        assert self._client is not None
        reply = _StreamReply(self.model)
        try:
            timeout = call_time_left(self.timeout)  # a guarded call: each wait ends with the request's time
            with httpx_sse.connect_sse(
                self._client, "POST", url, json=body, headers=self._headers(), timeout=timeout
            ) as source:
                status = source.response.status_code
                if status in RETRY_STATUS:
                    return f"HTTP {status}"
                if status >= 400:
                    source.response.read()
                    raise self._status_error(status, source.response.text)
                if source.response.headers.get("content-type", "").startswith("application/json"):
                    return (yield from self._whole_reply(source.response, url))
                for event in source.iter_sse():
                    delta = reply.take(event.data, url)
                    if delta:
                        yield delta
                    if reply.done:
                        break
        except (httpx.HTTPError, httpx_sse.SSEError) as exc:
            if not reply.pieces:
                return _transport_failure(exc, self.timeout)
            raise LLMError(
                f"{BACKEND_ID}: the stream from {url} broke after {len(reply.pieces)} piece(s) "
                f"({_transport_failure(exc, self.timeout)}); the reply is incomplete",
                backend_id=BACKEND_ID,
                step="stream",
            ) from None
        return reply.completion(url)

    def _whole_reply(self, response: httpx.Response, url: str) -> TokenStream:
        """A server that does not stream answers in one piece: its text as one delta."""
        response.read()
        try:
            whole = self._parse(response.json())
        except ValueError:
            raise LLMError(
                f"{BACKEND_ID}: {url} returned malformed JSON", backend_id=BACKEND_ID, step="stream"
            ) from None
        if whole.text:
            yield whole.text
        return whole

    # -- internals ---------------------------------------------------------------------------

    def _post(self, body: dict[str, Any], step: str) -> Any:
        """POST one chat completion request (retried per ``retries``); its decoded JSON."""
        self.warm_up()
        assert self._client is not None
        try:
            return request_json(
                self._client,
                "POST",
                f"{self.base_url}/chat/completions",
                error=LLMError,
                backend_id=BACKEND_ID,
                step=step,
                retries=self.retries,
                timeout=self.timeout,
                json=body,
                headers=self._headers(),
            )
        except LLMError as exc:
            raise self._classify(exc) from None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    def _status_error(self, status: int, text: str) -> LLMError:
        if status in (401, 403):
            where = f" in the environment variable {self._api_key_env}" if self._api_key_env else ""
            return LLMError(
                f"{BACKEND_ID}: HTTP {status} from {self.base_url}/chat/completions: check the API key{where}",
                backend_id=BACKEND_ID,
                step="stream",
            )
        return LLMError(
            f"{BACKEND_ID}: HTTP {status} from {self.base_url}/chat/completions: {clip(text, 200)!r}",
            backend_id=BACKEND_ID,
            step="stream",
        )

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


class _StreamReply:
    """What a chat completion event stream has said so far: deltas, usage, whether it ended."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.pieces: list[str] = []
        self.usage: dict[str, Any] = {}
        self.finished = False  # a choice said finish_reason
        self.done = False  # [DONE], or usage after the finish

    def take(self, data: str, url: str) -> str:
        """Read one event's data; return its text delta ("" for role, finish and usage events)."""
        if data.strip() == "[DONE]":
            self.done = True
            return ""
        try:
            chunk = json.loads(data)
            if not isinstance(chunk, dict):
                raise TypeError("not an object")
            if chunk.get("error"):
                raise LLMError(
                    f"{BACKEND_ID}: {url} reported an error mid-stream: {clip(chunk['error'], 200)}",
                    backend_id=BACKEND_ID,
                    step="stream",
                )
            self.model = str(chunk.get("model") or self.model)
            if chunk.get("usage"):
                self.usage = dict(chunk["usage"])
                self.done = self.done or self.finished  # the usage chunk comes last
            delta = ""
            for choice in chunk.get("choices") or []:
                delta += str((choice.get("delta") or {}).get("content") or "")
                self.finished = self.finished or bool(choice.get("finish_reason"))
        except (ValueError, TypeError, AttributeError):
            raise LLMError(
                f"{BACKEND_ID}: garbled stream from {url} (an event is not a chat.completion.chunk): "
                f"{clip(data, 120)!r}; check that llm.base_url points at an OpenAI-compatible chat server",
                backend_id=BACKEND_ID,
                step="stream",
            ) from None
        if delta:
            self.pieces.append(delta)
        return delta

    def completion(self, url: str) -> Completion:
        """The whole reply; a stream that stopped before saying it was finished is an error."""
        if not (self.finished or self.done):
            raise LLMError(
                f"{BACKEND_ID}: the stream from {url} ended after {len(self.pieces)} piece(s) without a "
                "finish_reason or [DONE]; the reply is incomplete",
                backend_id=BACKEND_ID,
                step="stream",
            )
        return Completion(
            text="".join(self.pieces).strip(),
            prompt_tokens=int(self.usage.get("prompt_tokens") or 0),
            completion_tokens=int(self.usage.get("completion_tokens") or len(self.pieces)),
            model=self.model,
        )


def _first_token_logprobs(payload: Any) -> list[tuple[str, float]] | None:
    """(token, logprob) of the first reply token's alternatives; None when the reply has none."""
    try:
        first = payload["choices"][0]["logprobs"]["content"][0]
        listed = first.get("top_logprobs") or [first]
        return [(str(t["token"]), float(t["logprob"])) for t in listed]
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def _yes_share(tops: Sequence[tuple[str, float]], url: str) -> float:
    """P(yes) / (P(yes) + P(no)) over the listed alternatives of one token."""

    def mass(word: str) -> float | None:
        ps = [math.exp(lp) for tok, lp in tops if tok.strip().lower() == word]
        return sum(ps) if ps else None

    yes, no = mass("yes"), mass("no")
    if yes is None and no is None:
        listed = ", ".join(repr(t) for t, _ in tops[:5])
        raise LLMError(
            f"{BACKEND_ID}: the reply from {url} starts with neither yes nor no (top tokens {listed})",
            backend_id=BACKEND_ID,
            step="yes_probability",
        )
    # An unlisted answer is no likelier than what the list leaves over, nor than its last entry.
    rest = max(0.0, 1.0 - sum(math.exp(lp) for _, lp in tops))
    bound = min(rest, math.exp(min(lp for _, lp in tops))) if len(tops) > 1 else rest
    py, pn = (yes if yes is not None else bound), (no if no is not None else bound)
    return py / (py + pn) if py + pn > 0 else 0.5


def _transport_failure(exc: Exception, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"no data for {timeout:g}s"
    if isinstance(exc, httpx_sse.SSEError):
        return f"not an event stream ({exc})"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return f"connection dropped mid-response ({type(exc).__name__})"
    return f"cannot connect ({type(exc).__name__})"


def _outgoing(messages: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """Copies of ``messages`` whose text holds no chat-template control token a server could parse."""
    return [
        {**m, "content": defuse_tokens(m["content"])} if isinstance(m.get("content"), str) else dict(m)
        for m in messages
    ]


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
