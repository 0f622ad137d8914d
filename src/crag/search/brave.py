"""Brave Search API: a Google/Bing-style keyed web search API.

Needs ``BRAVE_API_KEY`` (or the variable named by ``search.brave_api_key_env``); the key
goes in the ``X-Subscription-Token`` header, never in the URL, logs or error messages.
Brave returns no relevance score, so ``score`` is ``None`` and the order is its ranking.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import SecretStr

from crag.config import CragSettings, secret_from_env
from crag.errors import SearchError
from crag.redact import clip
from crag.registry import BackendDeps, Registries
from crag.search._http import HttpSearch, as_secret, check_query, malformed, text_field
from crag.types import WebResult

DEFAULT_URL = "https://api.search.brave.com"
MAX_COUNT = 20  # the API refuses larger pages
SNIPPET_CHARS = 300


class BraveSearch(HttpSearch):
    """``GET {base_url}/res/v1/web/search?q=..&count=..`` normalised into ``WebResult``.

    ``freshness`` is passed through when set (``pd``, ``pw``, ``pm``, ``py`` or a
    ``YYYY-MM-DDtoYYYY-MM-DD`` range) so time-sensitive questions get recent pages.

    ### Usage example
    >>> import httpx
    >>> def handler(request: httpx.Request) -> httpx.Response:
    ...     return httpx.Response(200, json={"type": "search", "web": {"results": [
    ...         {"title": "Beijing", "url": "https://example.org/bj",
    ...          "description": "<strong>Beijing</strong> is the capital of China."}]}})
    >>> search = BraveSearch(api_key="brave-test",
    ...                      client=httpx.Client(transport=httpx.MockTransport(handler)))
    >>> [(r.content, r.provider) for r in search.search("capital of China", k=3)]
    [('Beijing is the capital of China.', 'brave')]
    """

    name = "brave"

    def __init__(
        self,
        *,
        api_key: str | SecretStr,
        base_url: str = DEFAULT_URL,
        timeout: float = 10.0,
        retries: int = 1,
        freshness: str = "",
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url=base_url or DEFAULT_URL, timeout=timeout, retries=retries, client=client)
        self._api_key = as_secret(api_key)
        self.freshness = freshness

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """Up to ``k`` (at most 20) results with a non-empty description, best first."""
        if not check_query(query, k):
            return []
        params: dict[str, str | int] = {"q": query, "count": min(k, MAX_COUNT)}
        if self.freshness:
            params["freshness"] = self.freshness
        payload = self._call(
            "GET",
            "/res/v1/web/search",
            params=params,
            headers={
                "Accept": "application/json",
                "X-Subscription-Token": self._api_key.get_secret_value(),
            },
        )
        return _parse(payload)[:k]


def _malformed(what: str) -> SearchError:
    return malformed("brave", what)


def _text(value: Any, field: str) -> str:
    return text_field(value, field, "brave")


def _parse(payload: Any) -> list[WebResult]:
    if not isinstance(payload, dict):
        raise _malformed("expected a JSON object")
    web = payload.get("web")
    if web is None:
        # Brave omits "web" entirely when nothing matched: an empty answer, not an error.
        if payload.get("type") == "search" or "query" in payload:
            return []
        raise _malformed("no 'web' section")
    if not isinstance(web, dict) or not isinstance(web.get("results", []), list):
        raise _malformed("'web.results' is not a list")
    out: list[WebResult] = []
    for item in web.get("results", []):
        if not isinstance(item, dict):
            raise _malformed("a result is not an object")
        url = _text(item.get("url"), "url")
        content = _text(item.get("description"), "description")
        extra = item.get("extra_snippets")
        if isinstance(extra, list):
            content = " ".join([content, *(_text(e, "extra_snippets") for e in extra)]).strip()
        if not url or not content:
            continue
        out.append(
            WebResult(
                title=_text(item.get("title"), "title") or url,
                url=url,
                content=content,
                snippet=clip(content, SNIPPET_CHARS),
                published=_published(item),
                score=None,
                provider="brave",
            )
        )
    return out


def _published(item: dict[str, Any]) -> str:
    # page_age is ISO 8601 and machine-readable; age ("2 days ago", "March 5, 2024") is the fallback.
    for key in ("page_age", "age"):
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _make(settings: CragSettings, deps: BackendDeps) -> BraveSearch:
    s = settings.search
    return BraveSearch(
        api_key=secret_from_env(s.brave_api_key_env, what="search provider brave"),
        base_url=s.brave_url,
        timeout=s.timeout,
        retries=s.retries,
        client=deps.client,
    )


def register(registries: Registries) -> None:
    """Plugin entry point: the ``brave`` search provider."""
    registries.searches.register("brave", _make)
