"""A SearXNG-shaped HTTP server on 127.0.0.1 for tests, its behaviour chosen by the query:
``boom`` → HTTP 500, ``garbage`` → malformed JSON, ``empty`` → no results, ``hang`` → no
answer for ``HANG_SECONDS``; anything else answers ``results`` results (three) after ``delay``
seconds.

>>> import httpx
>>> with LocalSearxng() as server:
...     r = httpx.get(server.url + "/search", params={"q": "tea", "format": "json"})
>>> [x["title"] for x in r.json()["results"]], server.requests
(['tea 0', 'tea 1', 'tea 2'], 1)
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HANG_SECONDS = 3.0  # bounded, so a test that forgets its deadline still ends


class LocalSearxng:
    """A tiny SearXNG stand-in on 127.0.0.1 (see the module docstring)."""

    def __init__(self, delay: float = 0.0, results: int = 3) -> None:
        self.delay = delay
        self.results = results
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                q = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
                if "hang" in q:
                    time.sleep(HANG_SECONDS)
                time.sleep(owner.delay)
                if "boom" in q:
                    return self._send(500, b"internal error")
                if "garbage" in q:
                    return self._send(200, b"{not json")
                results = (
                    []
                    if "empty" in q
                    else [
                        {
                            "title": f"{q} {i}",
                            "url": f"https://example.org/{q.replace(' ', '-')}/{i}",
                            "content": f"Result {i} about {q}.",
                            "score": 1.0 - i / 10,
                        }
                        for i in range(owner.results)
                    ]
                )
                self._send(200, json.dumps({"query": q, "results": results}).encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LocalSearxng:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
