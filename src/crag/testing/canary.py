"""Canary secrets and loopback stubs that try to leak them (tests and ``benchmarks/reliability_input.py``).

A canary is a fake secret planted in the environment; the stubs echo every canary back the
way careless providers do (in error bodies, headers, and search results), and a collector
stub records what the OpenTelemetry exporter sends. A test then greps every output channel
for the canaries with :func:`leaks`.

### Usage example
>>> with EchoProvider() as provider:                                        # doctest: +SKIP
...     env = canary_env() | {"CRAG_SEARCH__TAVILY_URL": provider.url}
...     # run crag with env, collect outputs, then:
...     assert leaks(outputs) == []
"""

from __future__ import annotations

import base64
import gzip
import http.server
import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterable
from typing import Any

__all__ = [
    "CANARIES",
    "ECHO_KEY",
    "ESCAPED_KEYS",
    "UNKNOWN_KEYS",
    "Collector",
    "EchoProvider",
    "EscapingEcho",
    "OffsetEcho",
    "canary_env",
    "echoed_forms",
    "escaped_leaks",
    "key_fragments",
    "leaks",
]

# Secrets the process knows: by variable name (KEY, TOKEN...) or through a setting (llm.api_key_env).
CANARIES = {
    "TAVILY_API_KEY": "sk-canary-123",
    "BRAVE_API_KEY": "canary-brave-4567",
    "OPENAI_API_KEY": "sk-canary-openai-890",
    "CRAG_API_KEYS": "canary-api-key-one,canary-api-key-two",
    "MILVUS_TOKEN": "root:canary-milvus-pw",
    "CANARY_LLM_CRED_VAR": "canary-configured-llm",  # named only by CRAG_LLM__API_KEY_ENV
}
# Key-shaped strings no variable holds: only the pattern rules of crag.redact can catch them.
UNKNOWN_KEYS = ("sk-proj-CanaryUnknown0123456789abcd", "tvly-dev-CanaryUnknown98765")


def canary_env() -> dict[str, str]:
    """Environment that plants every canary (merge it into a subprocess's or monkeypatch it)."""
    return CANARIES | {"CRAG_LLM__API_KEY_ENV": "CANARY_LLM_CRED_VAR"}


def _needles() -> list[str]:
    values: list[str] = list(UNKNOWN_KEYS)
    for v in CANARIES.values():
        values += [p for p in v.split(",") if p]
    return values


def leaks(outputs: Iterable[str | bytes]) -> list[str]:
    """Canary values found in ``outputs`` (text or raw bytes such as protobuf or SQLite files)."""
    found: set[str] = set()
    for out in outputs:
        data = out if isinstance(out, bytes) else out.encode("utf-8", "surrogatepass")
        found.update(n for n in _needles() if n.encode() in data)
    return sorted(found)


class _Server:
    handler: type[http.server.BaseHTTPRequestHandler]

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        handler = type("Handler", (self.handler,), {"owner": self})
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _Quiet(http.server.BaseHTTPRequestHandler):
    owner: Any

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _body(self) -> bytes:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body


class _EchoHandler(_Quiet):
    def do_POST(self) -> None:
        body = self._body()
        self.owner.requests.append({"path": self.path, "auth": self.headers.get("Authorization", ""), "body": body})
        echo = ", ".join(_needles())
        if self.owner.mode == "error":
            status = 400
            payload: Any = {"detail": f"invalid api key {self.headers.get('Authorization', '')}; known: {echo}"}
        else:
            status = 200
            payload = {
                "results": [
                    {
                        "title": f"Leaky result {UNKNOWN_KEYS[0]}",
                        "url": f"https://example.org/page?api_key={CANARIES['TAVILY_API_KEY']}",
                        "content": f"The provider echoed its keys: {echo}. Atlantis has no capital.",
                        "score": 0.9,
                    }
                ]
            }
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Echo-Key", CANARIES["TAVILY_API_KEY"])
        self.end_headers()
        self.wfile.write(data)


class EchoProvider(_Server):
    """A Tavily-compatible search API on 127.0.0.1 that echoes every canary.

    ``mode = "error"`` answers 400 with the keys in the body (and a header);
    ``mode = "results"`` answers 200 with the keys inside a search result.
    """

    handler = _EchoHandler

    def __init__(self, mode: str = "error") -> None:
        super().__init__()
        self.mode = mode


class _CollectorHandler(_Quiet):
    def do_POST(self) -> None:
        self.owner.requests.append({"path": self.path, "body": self._body()})
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


class Collector(_Server):
    """An OTLP/HTTP receiver on 127.0.0.1 that keeps every raw body it is sent."""

    handler = _CollectorHandler

    def bodies(self) -> list[bytes]:
        return [r["body"] for r in self.requests]


# A key of no known shape (29 characters, as in issue 33): only its value, known from the
# environment, can be redacted, so any part of it that survives a cut is found.
ECHO_KEY = "qZ7hK2Lp9Wx4Rt6Vn3Bm8Cd5Fg1Js"


def key_fragments(outputs: Iterable[str | bytes], key: str = ECHO_KEY, length: int = 8) -> list[str]:
    """Every substring of ``key`` at least ``length`` long found in ``outputs`` (longest reported once)."""
    found: set[str] = set()
    pieces = [key[i : i + length] for i in range(len(key) - length + 1)]
    for out in outputs:
        data = out if isinstance(out, bytes) else out.encode("utf-8", "surrogatepass")
        found.update(p for p in pieces if p.encode() in data)
    return sorted(found)


def padded(offset: int, key: str = ECHO_KEY) -> str:
    """``offset`` characters of padding, the key, then a tail: where a careless provider puts it."""
    pad = ("request rejected: " + "padding " * 60)[:offset]
    return f"{pad}{key} (sent in the Authorization header); more detail follows " + "tail " * 40


class _OffsetHandler(_Quiet):
    def do_GET(self) -> None:
        self._answer(b"")

    def do_POST(self) -> None:
        self._answer(self._body())

    def _answer(self, body: bytes) -> None:
        owner: OffsetEcho = self.owner
        owner.requests.append({"path": self.path, "body": body})
        text = padded(owner.offset, owner.key)
        path = self.path.split("?")[0].rstrip("/")
        ctype = "application/json"
        if owner.mode == "error":
            status, data = 400, text.encode()
            ctype = "text/plain"
        elif owner.mode == "stream_error" and path.endswith("/chat/completions"):
            status, ctype = 200, "text/event-stream"
            data = b"data: " + json.dumps({"error": {"message": text}}).encode() + b"\n\n"
        elif owner.mode == "garbled_stream" and path.endswith("/chat/completions"):
            status, ctype = 200, "text/event-stream"
            data = b"data: " + text.encode() + b"\n\ndata: [DONE]\n\n"
        elif path.endswith("/embeddings"):
            status, data = 200, json.dumps({"data": [{"index": 0, "embedding": [0.1] * 8}]}).encode()
        elif path.endswith("/chat/completions"):
            status = 200
            message = {"role": "assistant", "content": text}
            data = json.dumps({"model": "echo", "choices": [{"message": message}], "usage": {}}).encode()
        else:  # search: Tavily (POST /search), SearXNG (GET /search), Brave (GET .../web/search)
            status = 200
            result = {"title": "Echo result", "url": "https://example.org/a", "content": text, "description": text}
            data = json.dumps({"results": [result | {"score": 0.9}], "web": {"results": [result]}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class OffsetEcho(_Server):
    """OpenAI chat and embeddings, Tavily, SearXNG and Brave search on 127.0.0.1, echoing ``key``
    after ``offset`` characters of padding.

    ``mode``: ``"error"`` answers HTTP 400 with the echo as the body; ``"reply"`` puts it in the
    chat answer and in every field of a search result; ``"stream_error"`` and
    ``"garbled_stream"`` answer a streamed chat with an error event or a garbled event.
    ``offset`` and ``mode`` may change between requests.
    """

    handler = _OffsetHandler

    def __init__(self, key: str = ECHO_KEY, *, offset: int = 0, mode: str = "error") -> None:
        super().__init__()
        self.key, self.offset, self.mode = key, offset, mode


# Keys a provider echoes escaped (issue 47): one with digits and a slash (PHP's json_encode writes
# it "\\/", which cut a Bearer pattern's match at the backslash), one with a slash and no digit
# (no key shape at all: only its known value can catch it).
ESCAPED_KEYS = {
    "TAVILY_API_KEY": "tvly-dev-Zr7Qp/4mWx9KtLb2Nc",
    "SEARCH_GATEWAY_TOKEN": "ZephyrKite/BlueSecretValue",
}


def echoed_forms(key: str) -> dict[str, str]:
    """``key`` as careless providers echo it: JSON-escaped two ways, URL-encoded, HTTP Basic, upper case."""
    return {
        "json_slash": key.replace("/", "\\/"),
        "json_unicode": key.replace("/", "\\u002f"),
        "url": urllib.parse.quote(key, safe=""),
        "basic": base64.b64encode(f"crag-client:{key}".encode()).decode("ascii"),
        "upper": key.upper(),
    }


def escaped_leaks(outputs: Iterable[str | bytes], keys: Iterable[str] = ESCAPED_KEYS.values()) -> list[str]:
    """Pieces of ``keys`` found in ``outputs``: 8 characters of a key in a row, 8 of a form's
    text between escapes, or 12 of its base64."""
    data = [o if isinstance(o, bytes) else o.encode("utf-8", "surrogatepass") for o in outputs]
    found: set[str] = set()
    for key in keys:
        found.update(key_fragments(data, key))
        for name, form in echoed_forms(key).items():
            size = 12 if name == "basic" else 8
            pieces = {form[i : i + size] for i in range(len(form) - size + 1)}
            pieces = {p for p in pieces if "%" not in p and "\\" not in p} if name != "basic" else pieces
            found.update(f"{name}:{p}" for p in pieces if any(p.encode() in d for d in data))
    return sorted(found)


class _EscapingHandler(_Quiet):
    def do_POST(self) -> None:
        self._body()
        owner: EscapingEcho = self.owner
        with owner.lock:
            key_name, form = next(owner.cycle)
            owner.served.append((key_name, form))
        echo = echoed_forms(ESCAPED_KEYS[key_name])[form]
        # Written by hand, as PHP would: json.dumps would double the backslash of "\\/".
        data = ('{"error":"invalid api key ' + echo + '","status":400}').encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class EscapingEcho(_Server):
    """A Tavily-compatible search API on 127.0.0.1 that answers every search HTTP 400 with a
    key of :data:`ESCAPED_KEYS` echoed in its error body, one form of :func:`echoed_forms` per
    request, in turn (``served`` lists them)."""

    handler = _EscapingHandler

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.cycle = itertools.cycle([(k, f) for f in echoed_forms("x") for k in ESCAPED_KEYS])
        self.served: list[tuple[str, str]] = []
