"""Shared plumbing for HTTP search providers: settings, an injected or owned client, JSON calls.

Each provider keeps only what differs — how it builds the request and parses the reply.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

import httpx
from pydantic import SecretStr

from crag.errors import SearchError
from crag.http import request_json

_TAG = re.compile(r"<[^>]+>")


class HttpSearch:
    """Base of the HTTP providers (tavily, brave, searxng); ``name`` names the backend."""

    name = "http"

    def __init__(self, *, base_url: str, timeout: float, retries: int, client: httpx.Client | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self._client = client
        self._owns_client = client is None

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One JSON request with the provider's timeout and bounded retries."""
        return request_json(
            self._http(),
            method,
            f"{self.base_url}{path}",
            error=SearchError,
            backend_id=self.name,
            step="search",
            retries=self.retries,
            timeout=self.timeout,
            **kwargs,
        )

    def close(self) -> None:
        """Close the HTTP client if this provider created it."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    def __repr__(self) -> str:  # keys stay out of reprs and traces
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client()
        return self._client


def check_query(query: str, k: int) -> bool:
    """Validate ``k``; False for a blank query, which needs no call at all."""
    if k < 1:
        raise ValueError("k must be >= 1")
    return bool(query.strip())


def as_secret(api_key: str | SecretStr) -> SecretStr:
    """Wrap a key so it never prints; an empty key is a programming error."""
    secret = api_key if isinstance(api_key, SecretStr) else SecretStr(api_key)
    if not secret.get_secret_value().strip():
        raise ValueError("api_key must not be empty")
    return secret


def finite_score(value: Any) -> float | None:
    """A provider's relevance score, or None (bool is an int subclass but not a score)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def plain_text(value: str) -> str:
    """Strip highlight tags and entities, collapse whitespace."""
    return " ".join(html.unescape(_TAG.sub("", value)).split())


API_CHANGED = "the API may have changed or a proxy answered instead"


def malformed(provider: str, what: str, hint: str = API_CHANGED) -> SearchError:
    """The one-line error for a reply that is not the provider's JSON shape."""
    return SearchError(f"{provider}: malformed response ({what}); {hint}", backend_id=provider, step="search")


def text_field(value: Any, field: str, provider: str, hint: str = "") -> str:
    """A result's text field as plain text ("" when absent); a non-string is a malformed reply."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise malformed(provider, f"{field} must be a string", *([hint] if hint else []))
    # Snippets carry <strong> highlights and HTML entities.
    return plain_text(value)
