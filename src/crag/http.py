"""One place for outbound HTTP: timeout, bounded retry with backoff, errors in our tree.

Backends take an optional ``httpx.Client`` so tests inject ``httpx.MockTransport``.
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

import httpx

from crag.errors import BackendError
from crag.redact import clip

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


def request_json(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    error: type[BackendError],
    backend_id: str,
    step: str,
    retries: int = 1,
    timeout: float = 30.0,
    backoff: float = 0.5,
    **kwargs: Any,
) -> Any:
    """Send a request and return its decoded JSON body, retrying transient failures.

    Raises ``error`` (a ``BackendError`` subclass) with a one-line message naming the
    backend and what to do. The message never includes request headers (they hold keys).
    """
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * (2 ** (attempt - 1)))
        try:
            resp = client.request(method, url, timeout=timeout, **kwargs)
        except httpx.HTTPError as exc:
            last = _transport_failure(exc, timeout)
            continue
        if resp.status_code in RETRY_STATUS:
            last = f"HTTP {resp.status_code}"
            continue
        return _json_body(resp, url, error=error, backend_id=backend_id, step=step)
    raise error(
        f"{backend_id}: {method} {_host(url)} failed after {retries + 1} attempt(s): {last}; "
        "check that the server is running and reachable",
        backend_id=backend_id,
        step=step,
    )


def _transport_failure(exc: httpx.HTTPError, timeout: float) -> str:
    """How a request that got no response failed (every such failure is retried)."""
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g}s"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return f"connection dropped mid-response ({type(exc).__name__})"
    return f"cannot connect ({type(exc).__name__})"


def _json_body(resp: httpx.Response, url: str, *, error: type[BackendError], backend_id: str, step: str) -> Any:
    """The decoded JSON of a final (not retried) response, or ``error`` saying why there is none."""
    if resp.status_code in (401, 403):
        raise error(
            f"{backend_id}: HTTP {resp.status_code} from {_host(url)}: check the API key",
            backend_id=backend_id,
            step=step,
        )
    if resp.status_code >= 400:
        raise error(
            f"{backend_id}: HTTP {resp.status_code} from {_host(url)}: {clip(resp.text, 200)!r}",
            backend_id=backend_id,
            step=step,
        )
    try:
        return resp.json()
    except ValueError:
        raise error(f"{backend_id}: {_host(url)} returned malformed JSON", backend_id=backend_id, step=step) from None


def is_local_url(url: str) -> bool:
    """True for loopback hosts (``localhost``, 127.0.0.0/8, ``::1``), which need no API key.

    >>> is_local_url("http://127.0.0.1:8080/v1"), is_local_url("https://api.deepseek.com")
    (True, False)
    """
    try:
        host = httpx.URL(url).host
    except (httpx.InvalidURL, TypeError):  # not a URL at all: certainly not a local one
        return False
    if host in ("localhost", "0.0.0.0") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host(url: str) -> str:
    try:
        u = httpx.URL(url)
        return f"{u.scheme}://{u.host}{':' + str(u.port) if u.port else ''}{u.path}"
    except (httpx.InvalidURL, TypeError):  # pragma: no cover - malformed URL
        return url
