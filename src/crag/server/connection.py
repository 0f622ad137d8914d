"""Connection limits uvicorn lacks: a header size cap (431) and header and body timeouts.

uvicorn's httptools parser reads request headers without a bound (a probe sent 200 MB of
headers and got 200), and no uvicorn protocol closes a connection that sends nothing, or
a header every few seconds (slowloris), or stops half-way through a body. So ``crag serve``
runs uvicorn with :func:`guarded_protocol`, a subclass of the protocol uvicorn would pick
(httptools when installed, else h11) that watches the raw bytes before they reach the parser:

- a request head (request line and headers, up to the blank line) longer than
  ``max_header_bytes`` is answered ``431`` and the connection closed, before the parser
  buffers more;
- a head not complete ``header_timeout`` seconds after the connection opened (or after the
  first byte of a later request on a kept-alive connection) is answered ``408`` and closed;
- a request body that pauses ``idle_timeout`` seconds is cut off (the connection closes).

Idle kept-alive connections are closed by uvicorn's own ``timeout_keep_alive``, set to
``idle_timeout`` as well. Errors use the API's JSON shape ``{"error": {"type", "message"}}``.

### Usage example
>>> import uvicorn                                                              # doctest: +SKIP
>>> limits = ConnectionLimits(max_header_bytes=64 * 1024, header_timeout=10, idle_timeout=15)
>>> uvicorn.run(app, http=guarded_protocol(limits), timeout_keep_alive=15)     # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ConnectionLimits", "GuardedH11Protocol", "guarded_protocol"]

_END_OF_HEAD = b"\r\n\r\n"
LINGER_SECONDS = 2.0  # after a refusal, input is drained this long so the answer is not lost to a reset


@dataclass(frozen=True)
class ConnectionLimits:
    """Settings ``[server]``: ``max_header_kb`` (here in bytes), ``header_timeout``, ``idle_timeout``."""

    max_header_bytes: int = 64 * 1024
    header_timeout: float = 10.0
    idle_timeout: float = 15.0


class _Guard:
    """Mixin over a uvicorn HTTP protocol class; see the module docstring."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def __init__(self, *args: Any, limits: ConnectionLimits | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits or ConnectionLimits()
        self._head: int | None = 0  # bytes of the current request head so far; None once complete
        self._tail = b""  # the last bytes seen, for an end of head split across two reads
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._await_head(start_clock=True)  # a connection that never sends a byte is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after a refusal: what the client still sends is dropped unread
        if self._head is not None and not self._take_head(data):
            return
        super().data_received(data)  # type: ignore[misc]
        self._watch_body()

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # type: ignore[misc]
        if self.transport.is_closing():
            return
        # A pipelined request whose head was already parsed is under way (h11 parses it here).
        if getattr(self, "pipeline", None) or (self.cycle is not before and not self.cycle.response_complete):
            return
        self._await_head(start_clock=False)

    # -- the request head -----------------------------------------------------------------
    def _await_head(self, *, start_clock: bool) -> None:
        self._head, self._tail = 0, b""
        self._cancel_timers()
        if start_clock:
            self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def _take_head(self, data: bytes) -> bool:
        """Count ``data`` into the current head; False when the connection was refused."""
        assert self._head is not None
        if self._head_timer is None:  # first byte of a request on a kept-alive connection
            self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)
        seen = self._tail + data
        end = seen.find(_END_OF_HEAD)
        size = self._head + (end + len(_END_OF_HEAD) - len(self._tail) if end >= 0 else len(data))
        if size > self.limits.max_header_bytes:
            kb = self.limits.max_header_bytes // 1024
            self._refuse(431, "headers_too_large", f"request line and headers exceed {kb} KB; send smaller headers")
            return False
        if end >= 0:
            self._head = None
            self._cancel_timers()
        else:
            self._head, self._tail = size, seen[-(len(_END_OF_HEAD) - 1) :]
        return True

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._head is None or self.transport.is_closing():
            return
        if self._head == 0:
            self.transport.close()  # nothing was sent: no request to answer
            return
        seconds = f"{self.limits.header_timeout:g}"
        self._refuse(408, "request_timeout", f"request headers not complete within {seconds} s; send them at once")

    # -- the request body -------------------------------------------------------------------
    def _watch_body(self) -> None:
        """While a body is being read, the connection may pause at most ``idle_timeout`` seconds."""
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        cycle = self.cycle
        if self._head is None and cycle is not None and cycle.more_body and not cycle.response_complete:
            self._body_timer = self.loop.call_later(self.limits.idle_timeout, self._body_timed_out)

    def _body_timed_out(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if cycle is not None and cycle.more_body and not self.transport.is_closing():
            self.transport.close()  # the app sees the client go; nothing more will come

    # -- helpers ------------------------------------------------------------------------------
    def _refuse(self, status: int, type_: str, message: str) -> None:
        """Answer ``status`` and close, lingering so the client reads the answer.

        Closing a socket with unread input makes the kernel send a reset, which can destroy
        the answer before the client reads it: so the write side is shut (FIN), further input
        is dropped unread for up to ``LINGER_SECONDS``, then the connection closes.
        """
        body = json.dumps({"error": {"type": type_, "message": message}}).encode()
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        self._cancel_timers()
        self._refused = True
        self.transport.write(head % (status, reason, len(body)) + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._head_timer = self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    def _cancel_timers(self) -> None:
        for name in ("_head_timer", "_body_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)


class GuardedH11Protocol(_Guard, H11Protocol):
    """uvicorn's h11 protocol with crag's connection limits."""


try:  # httptools is optional for uvicorn (its "standard" extra); used when installed, as uvicorn would
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(_Guard, HttpToolsProtocol):
        """uvicorn's httptools protocol with crag's connection limits."""

    _PROTOCOL: type[Any] = GuardedHttpToolsProtocol
except ImportError:  # pragma: no cover - depends on the environment
    _PROTOCOL = GuardedH11Protocol


def guarded_protocol(limits: ConnectionLimits, *, parser: str = "auto") -> Any:
    """The ``http=`` argument for uvicorn: the guarded protocol with ``limits`` bound.

    A ``functools.partial`` of a module-level class, so it pickles into uvicorn's worker
    processes. ``parser`` is ``"auto"`` (httptools when installed), ``"h11"`` or ``"httptools"``.
    """
    cls: Callable[..., Any] = GuardedH11Protocol if parser == "h11" else _PROTOCOL
    if parser == "httptools" and cls is GuardedH11Protocol:
        raise RuntimeError("httptools is not installed; pip install httptools or use parser='h11'")
    return functools.partial(cls, limits=limits)
