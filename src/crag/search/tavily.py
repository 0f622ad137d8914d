"""Tavily web search: the article's "web search" action against a real search API.

Needs ``TAVILY_API_KEY`` (or the variable named by ``search.tavily_api_key_env``); the key
goes in the ``Authorization`` header, never in the body, logs or error messages.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import SecretStr

from crag.config import CragSettings, secret_from_env
from crag.errors import SearchError
from crag.redact import clip
from crag.registry import BackendDeps, Registries
from crag.search._http import HttpSearch, as_secret, check_query, finite_score, malformed
from crag.types import WebResult

DEFAULT_URL = "https://api.tavily.com"
SNIPPET_CHARS = 300


class TavilySearch(HttpSearch):
    """``POST {base_url}/search`` and normalise the hits into :class:`~crag.types.WebResult`.

    ### Usage example
    >>> import httpx
    >>> def handler(request: httpx.Request) -> httpx.Response:
    ...     return httpx.Response(200, json={"query": "q", "results": [
    ...         {"title": "Beijing", "url": "https://example.org/bj",
    ...          "content": "Beijing is the capital of China.", "score": 0.9}]})
    >>> search = TavilySearch(api_key="tvly-test",
    ...                       client=httpx.Client(transport=httpx.MockTransport(handler)))
    >>> [(r.title, r.provider) for r in search.search("capital of China", k=3)]
    [('Beijing', 'tavily')]
    """

    name = "tavily"

    def __init__(
        self,
        *,
        api_key: str | SecretStr,
        base_url: str = DEFAULT_URL,
        timeout: float = 10.0,
        retries: int = 1,
        search_depth: str = "basic",
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url=base_url or DEFAULT_URL, timeout=timeout, retries=retries, client=client)
        self._api_key = as_secret(api_key)
        self.search_depth = search_depth

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """Up to ``k`` results with non-empty content, in Tavily's order (best first)."""
        if not check_query(query, k):
            return []
        body = {
            "query": query,
            "max_results": k,
            "search_depth": self.search_depth,
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        payload = self._call(
            "POST",
            "/search",
            json=body,
            headers={"Authorization": f"Bearer {self._api_key.get_secret_value()}"},
        )
        return _parse(payload)[:k]


def _malformed(what: str) -> SearchError:
    return malformed("tavily", what)


def _parse(payload: Any) -> list[WebResult]:
    if not isinstance(payload, dict):
        raise _malformed("expected a JSON object")
    results = payload.get("results")
    if not isinstance(results, list):
        raise _malformed("no 'results' list")
    out: list[WebResult] = []
    for item in results:
        if not isinstance(item, dict):
            raise _malformed("a result is not an object")
        content = item.get("content")
        if content is None or (isinstance(content, str) and not content.strip()):
            continue  # nothing to ground an answer on
        title, url, published = item.get("title"), item.get("url", ""), item.get("published_date")
        if not isinstance(content, str) or not isinstance(url, str):
            raise _malformed("content and url must be strings")
        if title is not None and not isinstance(title, str):
            raise _malformed("title must be a string")
        content = content.strip()
        out.append(
            WebResult(
                title=(title or "").strip() or url,
                url=url,
                content=content,
                snippet=clip(content, SNIPPET_CHARS),
                published=published if isinstance(published, str) else "",
                score=finite_score(item.get("score")),
                provider="tavily",
            )
        )
    return out


def _make(settings: CragSettings, deps: BackendDeps) -> TavilySearch:
    s = settings.search
    return TavilySearch(
        api_key=secret_from_env(s.tavily_api_key_env, what="search provider tavily"),
        base_url=s.tavily_url,
        timeout=s.timeout,
        retries=s.retries,
        client=deps.client,
    )


def register(registries: Registries) -> None:
    """Plugin entry point: the ``tavily`` search provider."""
    registries.searches.register("tavily", _make)
