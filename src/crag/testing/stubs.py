"""Real HTTP stub servers on 127.0.0.1 for fault injection (tests, benchmarks, plugins).

:class:`StubLLM` speaks the OpenAI ``/v1/chat/completions`` API; :class:`StubSearch` speaks
Tavily (``POST /search``) and SearXNG (``GET /search?format=json``). Each is a real socket
server in a thread, and ``fault`` switches it, at any time, between healthy and one of
:data:`FAULTS`, so the client's whole HTTP stack (connect, timeouts, retries, decoding)
runs as in production.

==========================  =================================================================
fault                       what the client meets
==========================  =================================================================
``ok``                      a well-formed answer
``down``                    ``url`` names a closed port (connection refused)
``slow``                    the answer comes after ``delay`` seconds (past any deadline)
``http_500``                HTTP 500 with a JSON error body
``truncated_body``          ``Content-Length`` promises more than is sent, then the socket closes
``truncated_sse``           half an SSE ``data:`` event (``text/event-stream``), then close
``garbage_json``            ``application/json`` that does not parse
``wrong_shape``             valid JSON of another API (no ``choices`` / ``results``)
``wrong_content_type``      an HTML error page with status 200
``empty_body``              status 200, ``Content-Length: 0``
==========================  =================================================================

### Usage example
>>> import httpx
>>> with StubLLM() as llm:
...     r = httpx.post(f"{llm.url}/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
...     llm.fault = "http_500"
...     bad = httpx.post(f"{llm.url}/chat/completions", json={"messages": []})
>>> r.json()["choices"][0]["message"]["content"], bad.status_code
('Stub answer from the sources [1].', 500)
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from crag.testing.net import free_port

FAULTS = (
    "ok",
    "down",
    "slow",
    "http_500",
    "truncated_body",
    "truncated_sse",
    "garbage_json",
    "wrong_shape",
    "wrong_content_type",
    "empty_body",
)

Reply = tuple[int, str, bytes]  # status, content type, body


class StubServer:
    """A threaded HTTP server on loopback; subclasses say what a healthy reply is."""

    api_path = ""  # appended to the base URL clients are configured with

    def __init__(self, fault: str = "ok", *, delay: float = 60.0) -> None:
        self.fault = fault
        self.delay = delay
        # (n, fault): after n more requests are served, switch to ``fault`` (a failure mid-run)
        self.fault_after: tuple[int, str] | None = None
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request served
        self._stop = threading.Event()
        self._closed_port = free_port()  # nothing listens here: the "down" fault
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=type(self).__name__, daemon=True)

    @property
    def fault(self) -> str:
        return self._fault

    @fault.setter
    def fault(self, value: str) -> None:
        if value not in FAULTS:
            raise ValueError(f"unknown fault {value!r}; use one of {', '.join(FAULTS)}")
        self._fault = value

    @property
    def url(self) -> str:
        """The base URL to configure (a closed port while the fault is ``down``)."""
        port = self._closed_port if self.fault == "down" else self._httpd.server_address[1]
        return f"http://127.0.0.1:{port}{self.api_path}"

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()  # wakes "slow" handlers so shutdown is quick
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reply(self, method: str, path: str, body: bytes) -> Reply:  # pragma: no cover - abstract
        raise NotImplementedError


class StubLLM(StubServer):
    """An OpenAI-compatible chat endpoint (a healthy reply cites source [1]) and an
    ``/embeddings`` endpoint (deterministic hashed vectors, ``dim`` wide).

    Configure crag with ``llm.backend = "openai"`` and ``llm.base_url = stub.url`` (or
    ``embedder.backend = "openai"`` and ``embedder.base_url = stub.url``).
    """

    dim = 16

    api_path = "/v1"
    answer = "Stub answer from the sources [1]."

    def reply(self, method: str, path: str, body: bytes) -> Reply:
        request = json.loads(body or b"{}")
        if path.rstrip("/").endswith("/embeddings"):
            texts = request.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            data = [{"index": i, "embedding": _hashed(str(t), self.dim)} for i, t in enumerate(texts)]
            return _json(200, {"data": data, "model": request.get("model", "stub")})
        if not path.rstrip("/").endswith("/chat/completions"):
            return _json(404, {"error": {"message": f"no route {path}"}})
        wants_json = "response_format" in request
        payload = {
            "id": "stub-1",
            "object": "chat.completion",
            "model": request.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}" if wants_json else self.answer}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 8},
        }
        return _json(200, payload)


class StubSearch(StubServer):
    """A web search API: Tavily's ``POST /search`` and SearXNG's ``GET /search?format=json``.

    Configure crag with ``search.provider = "tavily"`` and ``search.tavily_url = stub.url``
    (any key in ``TAVILY_API_KEY``), or ``"searxng"`` and ``search.searxng_url``.
    """

    def __init__(self, fault: str = "ok", *, delay: float = 60.0, results: list[dict[str, str]] | None = None) -> None:
        super().__init__(fault, delay=delay)
        self.results = results if results is not None else list(DEFAULT_RESULTS)

    def reply(self, method: str, path: str, body: bytes) -> Reply:
        if not path.split("?")[0].rstrip("/").endswith("/search"):
            return _json(404, {"error": f"no route {path}"})
        return _json(200, {"query": "stub", "results": [dict(r, score=0.9) for r in self.results]})


DEFAULT_RESULTS = (
    {
        "title": "Zorblax Bridge",
        "url": "https://example.org/zorblax",
        "content": "The Zorblax Bridge was designed by the engineer Mira Quell and opened in 1931.",
    },
    {
        "title": "佐布拉克斯大桥",
        "url": "https://example.org/zh/zorblax",
        "content": "佐布拉克斯大桥由工程师米拉·奎尔设计，于1931年通车。",
    },
)


def _hashed(text: str, dim: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255.0 - 0.5 for b in (digest * (dim // len(digest) + 1))[:dim]]


def _json(status: int, payload: Any) -> Reply:
    return status, "application/json", json.dumps(payload, ensure_ascii=False).encode()


def _handler_for(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: tests read their own output
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            stub.requests.append((method, self.path))
            if stub.fault_after is not None:
                n, later = stub.fault_after
                stub.fault_after = (n - 1, later) if n > 0 else None
                if n <= 0:
                    stub.fault = later
            fault = stub.fault
            if fault == "slow" and stub._stop.wait(stub.delay):
                return  # shutting down
            status, ctype, data = stub.reply(method, self.path, body)
            if fault == "http_500":
                status, ctype, data = _json(500, {"error": {"message": "stub: injected internal error"}})
            elif fault == "garbage_json":
                ctype, data = "application/json", b'{"choices": [{"message": {"content": "unterminated'
            elif fault == "wrong_shape":
                ctype, data = "application/json", b'{"status": "ok", "data": [1, 2, 3]}'
            elif fault == "wrong_content_type":
                ctype, data = "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            elif fault == "empty_body":
                data = b""
            elif fault == "truncated_sse":
                ctype, data = "text/event-stream", b'data: {"choices": [{"delta": {"content": "Par'
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            cut = fault in ("truncated_body", "truncated_sse")
            self.send_header("Content-Length", str(len(data) * 2 if cut else len(data)))
            if cut:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            if cut:
                self.close_connection = True

    return Handler
