"""Request guards: API keys, per-key rate limits, and a body-size cap.

They are plain ASGI middlewares so they run before FastAPI parses anything: an
unauthenticated or oversized request costs no JSON parsing and no engine work.

>>> auth = Authenticator(["k-123456"])
>>> auth.identify("Bearer k-123456")
'key-0'
>>> auth.identify("Bearer wrong") is None
True
"""

from __future__ import annotations

import hmac
import ipaddress
import math
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from crag.server.schemas import error_response

__all__ = [
    "OPEN_PATHS",
    "Authenticator",
    "BodyLimitMiddleware",
    "GuardMiddleware",
    "RateLimiter",
    "is_loopback",
    "keys_from_env",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Liveness must work for load balancers that hold no key; the UI shell and the API's
# description (/, /docs, /openapi.json) are static and fetch every piece of data through
# the authenticated API.
OPEN_PATHS = ("/healthz", "/", "/docs", "/openapi.json")
OPEN_PREFIXES = ("/ui", "/docs")
ENV_KEYS = "CRAG_API_KEYS"


def keys_from_env(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Keys from ``CRAG_API_KEYS=key1,key2`` (blank entries ignored)."""
    raw = (environ if environ is not None else os.environ).get(ENV_KEYS, "")
    return [k.strip() for k in raw.split(",") if k.strip()]


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; the only hosts allowed without keys."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Authenticator:
    """Checks ``Authorization: Bearer <key>`` against the configured keys.

    Keys are compared with :func:`hmac.compare_digest` against every key (no early
    exit) so response time does not reveal how much of a guess was right. Callers get
    a stable label (``key-0``), never the key itself, for rate limiting and logs.
    """

    def __init__(self, keys: Iterable[str]) -> None:
        self._keys = [k.encode("utf-8") for k in keys if k]

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def identify(self, authorization: str | None) -> str | None:
        """The label of the key in an ``Authorization`` header value, or None."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        given = token.strip().encode("utf-8", "surrogateescape")
        found: str | None = None
        for i, key in enumerate(self._keys):
            if hmac.compare_digest(given, key):
                found = f"key-{i}"
        return found


class RateLimiter:
    """A sliding-window limit: at most ``per_minute`` requests per caller in any 60 s.

    >>> rl = RateLimiter(2, clock=lambda: 0.0)
    >>> rl.hit("a"), rl.hit("a"), rl.hit("a")[0]
    ((True, 0.0), (True, 0.0), False)
    """

    def __init__(self, per_minute: int, *, window: float = 60.0, clock: Callable[[], float] = time.monotonic):
        if per_minute <= 0:
            raise ValueError("rate_limit_per_minute must be positive")
        self.limit = per_minute
        self.window = window
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def hit(self, caller: str) -> tuple[bool, float]:
        """Count a request; return (allowed, seconds until the next one would be allowed)."""
        now = self._clock()
        with self._lock:
            q = self._hits.setdefault(caller, deque())
            while q and q[0] <= now - self.window:
                q.popleft()
            if len(q) >= self.limit:
                return False, max(0.0, q[0] + self.window - now)
            q.append(now)
            return True, 0.0


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class GuardMiddleware:
    """Authentication, then rate limiting, for every HTTP request except open paths."""

    def __init__(self, app: ASGIApp, *, auth: Authenticator, limiter: RateLimiter | None = None) -> None:
        self.app = app
        self.auth = auth
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in OPEN_PATHS or path == "/ui" or any(path.startswith(p + "/") for p in OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "OPTIONS" and _header(scope, b"access-control-request-method"):
            await self.app(scope, receive, send)  # CORS preflight carries no credentials
            return
        client = scope.get("client") or (None, None)
        if self.auth.enabled:
            caller = self.auth.identify(_header(scope, b"authorization"))
            if caller is None:
                response = error_response(
                    401,
                    "unauthorized",
                    "missing or invalid API key; send the header Authorization: Bearer <key>",
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        else:
            # No keys: a development server, so only this machine may call it.
            if not is_loopback(client[0]):
                response = error_response(
                    401,
                    "unauthorized",
                    "this server has no API keys configured and accepts local clients only",
                )
                await response(scope, receive, send)
                return
            caller = f"ip-{client[0]}"
        if self.limiter is not None:
            allowed, retry = self.limiter.hit(caller)
            if not allowed:
                seconds = max(1, math.ceil(retry))
                response = error_response(
                    429,
                    "rate_limited",
                    f"rate limit of {self.limiter.limit} requests per minute exceeded; retry in {seconds} s",
                    headers={"Retry-After": str(seconds)},
                )
                await response(scope, receive, send)
                return
        scope.setdefault("state", {})["caller"] = caller
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Rejects request bodies over ``max_bytes`` with 413 before anything parses them.

    A declared ``Content-Length`` over the cap is refused without reading; otherwise the
    body is read up to the cap (chunked uploads lie about nothing) and replayed to the app.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._reject(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before sending its body; nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # afterwards: wait for the disconnect, as servers do

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "payload_too_large", f"request body is larger than the limit of {self.max_bytes:,} bytes"
        )
        # Connection: close, because the unread rest of the body is still on the socket.
        response.headers["Connection"] = "close"
        await response(scope, receive, send)
