"""Request guards: API keys, per-key rate limits, and a body-size cap.

They are plain ASGI middlewares so they run before FastAPI parses anything: an
unauthenticated or oversized request costs no JSON parsing and no engine work.

The ``Authorization`` header must read exactly ``Bearer <key>``: the scheme in any case
(``bearer`` too, as RFC 7235 makes schemes case-insensitive), one space, then the key
as an RFC 6750 ``b64token`` (letters, digits, ``- . _ ~ + /``, trailing ``=``). Anything
else (two spaces, a tab, a trailing space, a second token) is refused with a 401 that
says so; RFC 6750 would allow several spaces, but a header that differs from the one
form is more often a templating bug than a choice, and a single form leaves no doubt
about which bytes are the key. Keys are checked for the same alphabet when the server
starts (:func:`check_keys`).

>>> auth = Authenticator(["k-123456"])
>>> auth.identify("Bearer k-123456"), auth.identify("bearer k-123456")
('key-0', 'key-0')
>>> auth.identify("Bearer wrong") is None, auth.identify("Bearer  k-123456") is None
(True, True)
"""

from __future__ import annotations

import hmac
import ipaddress
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from crag.config import ApiKeySettings, CragSettings
from crag.errors import ConfigError
from crag.redact import register, register_env
from crag.server.schemas import error_response

__all__ = [
    "OPEN_PATHS",
    "ApiKey",
    "Authenticator",
    "BodyLimitMiddleware",
    "GuardMiddleware",
    "RateLimiter",
    "all_keys",
    "check_keys",
    "check_origins",
    "is_loopback",
    "keys_from_env",
    "keys_from_settings",
    "parse_authorization",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Liveness must work for load balancers that hold no key; the UI shell and the API's
# description (/, /docs, /openapi.json) are static and fetch every piece of data through
# the authenticated API.
OPEN_PATHS = ("/healthz", "/readyz", "/", "/docs", "/openapi.json")
OPEN_PREFIXES = ("/ui", "/docs")
ENV_KEYS = "CRAG_API_KEYS"


# Never "Authorization: ..." in a message: the redactor takes what follows it for a credential.
_SEND = 'send the header "Authorization" with the value "Bearer <key>"'
# RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


@dataclass(frozen=True)
class ApiKey:
    """A key and its scope: the collections it may use (``None``: all) and whether it may write.

    >>> k = ApiKey("s3cret-key", collections=frozenset({"handbook"}), write=False)
    >>> k.may("handbook"), k.may("handbook", write=True), k.may("catalogue")
    (True, False, False)
    """

    value: str
    label: str = ""
    collections: frozenset[str] | None = None
    write: bool = True

    def may(self, collection: str, *, write: bool = False) -> bool:
        """True when this key may read (or, with ``write``, write) ``collection``."""
        inside = self.collections is None or collection in self.collections
        return inside and (self.write or not write)


def keys_from_env(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Keys from ``CRAG_API_KEYS=key1,key2`` (blank entries ignored)."""
    raw = (environ if environ is not None else os.environ).get(ENV_KEYS, "")
    return [k.strip() for k in raw.split(",") if k.strip()]


def keys_from_settings(
    entries: Sequence[ApiKeySettings], environ: MutableMapping[str, str] | None = None
) -> list[ApiKey]:
    """Scoped keys of ``[[server.keys]]``, each read from the variable its ``key_env`` names.

    A variable that is unset or empty is a ``ConfigError`` naming it: a key that silently
    vanished would lock its users out, or leave them wondering why.
    """
    env = environ if environ is not None else os.environ
    keys: list[ApiKey] = []
    for i, entry in enumerate(entries):
        register_env(entry.key_env)  # whatever it is called, its value never leaves the process
        value = env.get(entry.key_env, "").strip()
        if not value:
            raise ConfigError(f"server.keys[{i}].key_env names {entry.key_env}, which is not set; export the key in it")
        scope = None if "*" in entry.collections else frozenset(entry.collections)
        keys.append(ApiKey(value, collections=scope, write=entry.access == "write"))
    return keys


def all_keys(settings: CragSettings) -> list[str | ApiKey]:
    """``CRAG_API_KEYS`` (every collection, read and write), then the scoped ``[[server.keys]]``."""
    return [*keys_from_env(), *keys_from_settings(settings.server.keys)]


def check_keys(keys: Iterable[str | ApiKey]) -> list[ApiKey]:
    """The keys as :class:`ApiKey` with labels (``key-0``...), each checked to fit a Bearer header.

    Raises ``ConfigError`` for a key no client could send (see the module docstring).
    """
    out: list[ApiKey] = []
    for i, key in enumerate(keys):
        k = key if isinstance(key, ApiKey) else ApiKey(key)
        if not _B64TOKEN.fullmatch(k.value):
            raise ConfigError(
                f"API key #{i + 1} has characters an Authorization: Bearer header cannot carry; use letters, "
                "digits and - . _ ~ + / (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        out.append(ApiKey(k.value, f"key-{i}", k.collections, k.write))
    return out


def check_origins(origins: Iterable[str]) -> list[str]:
    """CORS origins as given, each ``scheme://host[:port]`` or ``*``; else a ``ConfigError``.

    A browser sends its page's origin without a path, so ``http://localhost:3000/`` would
    never match: it is refused when the server starts, not left to fail every request.

    >>> check_origins(["http://localhost:3000", "*"])
    ['http://localhost:3000', '*']
    """
    out = list(origins)
    for origin in out:
        if origin != "*" and not re.fullmatch(r"https?://[^/\s?#]+", origin):
            raise ConfigError(
                f"CORS origin {origin!r} is not an origin; write scheme://host[:port] without a path or "
                "trailing slash (e.g. http://localhost:3000), or *"
            )
    return out


def parse_authorization(header: str | None) -> tuple[str | None, str]:
    """``(token, "")`` from an ``Authorization`` value, or ``(None, why it is refused)``.

    >>> parse_authorization("Bearer abc="), parse_authorization("bearer abc")
    (('abc=', ''), ('abc', ''))
    >>> parse_authorization("Bearer  abc")[1].split(";")[0]
    'malformed Authorization header'
    """
    if not header:
        return None, f"missing API key; {_SEND}"
    scheme, sep, token = header.partition(" ")
    if not header[:6].lower() == "bearer":  # the scheme is never echoed: it may be the key itself
        return None, f"unsupported Authorization scheme; {_SEND}"
    if scheme.lower() != "bearer" or not sep or not _B64TOKEN.fullmatch(token):
        return None, f"malformed Authorization header; {_SEND}, one space, no other whitespace"
    return token, ""


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

    def __init__(self, keys: Iterable[str | ApiKey]) -> None:
        self.keys = check_keys(k for k in keys if (k.value if isinstance(k, ApiKey) else k))
        register([k.value for k in self.keys])  # keys handed over in code are secrets too
        self._encoded = [k.value.encode("ascii") for k in self.keys]

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def identify(self, authorization: str | None) -> str | None:
        """The label of the key in an ``Authorization`` header value, or None."""
        key, _ = self.lookup(authorization)
        return key.label if key is not None else None

    def lookup(self, authorization: str | None) -> tuple[ApiKey | None, str]:
        """The key an ``Authorization`` header value carries, or ``(None, why it is refused)``."""
        token, why = parse_authorization(authorization)
        if token is None:
            return None, why
        given = token.encode("ascii")
        found: ApiKey | None = None
        for key, encoded in zip(self.keys, self._encoded, strict=True):
            if hmac.compare_digest(given, encoded):
                found = key
        return (found, "") if found is not None else (None, "invalid API key; check the key you send")


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
        key: ApiKey | None = None
        if self.auth.enabled:
            key, why = self.auth.lookup(_header(scope, b"authorization"))
            if key is None:
                response = error_response(401, "unauthorized", why, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
            caller = key.label
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
        state = scope.setdefault("state", {})
        state["caller"] = caller
        state["api_key"] = key  # None: no keys configured, a local development server (all access)
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
