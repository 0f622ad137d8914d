"""Clients that hang up: the run they asked for stops, and the access log still has their line.

uvicorn tells an app that its client left by an ``http.disconnect`` message from
``receive()``, and only to a coroutine waiting on it. A streamed response waits on it while it
sends (Starlette's ``StreamingResponse``), and closing its body closes the run. Before a
response starts nobody waits: while a chat stream holds its reply until the first verified
sentence, or a JSON answer is written whole, a client that hangs up would leave the model
writing to nobody until the end. :func:`stop_on_hangup` waits on ``receive()`` beside that
work and calls ``stop`` (``AnswerStream.close``) the moment the client leaves; the model stops
at its next piece.

uvicorn writes its access line when the response starts and silently drops a response that
starts after its client left, so such a request would leave no line at all.
:class:`HangUpLogMiddleware` writes it, in uvicorn's format, with the status 499 (nginx's
"client closed request"): ``127.0.0.1:50412 - "POST /v1/chat/completions HTTP/1.1" 499``.

### Usage example
>>> async def handler(request):                                      # doctest: +SKIP
...     stream = engine.ask_stream(question)
...     async with stop_on_hangup(request.receive, stream.close):
...         first = await first_events(live_events(stream))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CLIENT_CLOSED", "HangUpLogMiddleware", "stop_on_hangup"]

CLIENT_CLOSED = 499  # nginx's status for a request whose client closed the connection first
_ACCESS = logging.getLogger("uvicorn.access")


@contextlib.asynccontextmanager
async def stop_on_hangup(receive: Receive, stop: Callable[[], None]) -> AsyncIterator[None]:
    """Call ``stop()`` if the client hangs up while the block runs.

    Use it only once the request body has been read (every later message is the disconnect)
    and only until a streamed response starts listening itself.
    """

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        stop()

    watcher = asyncio.create_task(watch())
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


class HangUpLogMiddleware:
    """Writes the access line uvicorn drops: a request whose client left before its response started."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = left = False

        async def watched_receive() -> Message:
            nonlocal left
            message = await receive()
            if message["type"] == "http.disconnect" and not started:
                left = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start" and not left:
                started = True  # the server writes this response's line itself
            await send(message)

        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            if left:
                _ACCESS.info('%s - "%s %s HTTP/%s" %d', *_request_line(scope), CLIENT_CLOSED)


def _request_line(scope: Scope) -> tuple[str, str, str, str]:
    """uvicorn's access-line arguments: client address, method, path with query, HTTP version."""
    client: Any = scope.get("client")
    where = f"{client[0]}:{client[1]}" if client else ""
    raw = scope.get("raw_path")
    path = raw.decode("latin1") if isinstance(raw, bytes) else urllib.parse.quote(scope.get("path", ""))
    if query := scope.get("query_string", b""):
        path = f"{path}?{query.decode('ascii', 'replace')}"
    return where, str(scope.get("method", "")), path.replace('"', "%22"), str(scope.get("http_version", "1.1"))
