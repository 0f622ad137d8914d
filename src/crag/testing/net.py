"""Network helpers for tests and benchmarks that start local servers (loopback only).

>>> 0 < free_port() < 65536
True
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_in_thread(app: Any, *, start_timeout: float = 30.0, **options: Any) -> Iterator[str]:
    """Serve an ASGI ``app`` with uvicorn on a free loopback port in a thread; yield its URL.

    ``options`` go to ``uvicorn.Config`` (e.g. ``crag.server.app.uvicorn_limits(settings)``).
    The server is stopped (and its thread joined) when the block ends.
    """
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start within {start_timeout:.0f} s")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


class Recorder:
    """An ``httpx.MockTransport`` handler: replays responses in order (the last repeats) and
    keeps every request, so a test sees what a backend sent without a network.

    >>> rec = Recorder(httpx.Response(500), httpx.Response(200, json={"ok": True}))
    >>> client = httpx.Client(transport=httpx.MockTransport(rec))
    >>> [client.get("https://e.test/a").status_code for _ in range(3)], len(rec.requests)
    ([500, 200, 200], 3)
    """

    def __init__(self, *responses: httpx.Response | Callable[[httpx.Request], httpx.Response]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        nxt = self.responses[min(len(self.requests), len(self.responses)) - 1]
        return nxt(request) if callable(nxt) else nxt
