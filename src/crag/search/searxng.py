"""SearXNG: a self-hosted metasearch engine queried through its JSON API.

The instance must allow the JSON format (``search.formats: [html, json]`` in its
``settings.yml``); otherwise it answers HTTP 403, which we report with that hint.
No key is needed: the instance is yours.
"""

from __future__ import annotations

from typing import Any

import httpx

from crag.config import CragSettings
from crag.errors import SearchError
from crag.redact import clip
from crag.registry import BackendDeps, Registries
from crag.search._http import HttpSearch, check_query, finite_score, malformed, text_field
from crag.types import WebResult

DEFAULT_URL = "http://127.0.0.1:8888"
SNIPPET_CHARS = 300


class SearxngSearch(HttpSearch):
    """``GET {base_url}/search?q=..&format=json`` normalised into :class:`~crag.types.WebResult`.

    ### Usage example
    >>> import httpx
    >>> def handler(request: httpx.Request) -> httpx.Response:
    ...     return httpx.Response(200, json={"query": "q", "results": [
    ...         {"title": "Beijing", "url": "https://example.org/bj",
    ...          "content": "Beijing is the capital of China.", "score": 2.5}]})
    >>> search = SearxngSearch(base_url="http://127.0.0.1:8888",
    ...                        client=httpx.Client(transport=httpx.MockTransport(handler)))
    >>> [(r.title, r.provider) for r in search.search("capital of China", k=3)]
    [('Beijing', 'searxng')]
    """

    name = "searxng"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_URL,
        timeout: float = 10.0,
        retries: int = 1,
        language: str = "",
        client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url=base_url or DEFAULT_URL, timeout=timeout, retries=retries, client=client)
        self.language = language

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """Up to ``k`` results with non-empty content, in SearXNG's order (best first)."""
        if not check_query(query, k):
            return []
        params = {"q": query, "format": "json"}
        if self.language:
            params["language"] = self.language
        try:
            payload = self._call(
                "GET",
                "/search",
                params=params,
                headers={"Accept": "application/json"},
            )
        except SearchError as exc:
            if "HTTP 403" in str(exc):
                # SearXNG's answer when format=json is not enabled, not a key problem.
                raise SearchError(
                    f"searxng: HTTP 403 from {self.base_url}/search: enable the JSON format "
                    "(search.formats: [html, json]) in the instance's settings.yml",
                    backend_id="searxng",
                    step="search",
                ) from None
            raise
        return _parse(payload)[:k]


_HINT = "check that search.searxng_url points at a SearXNG instance"


def _malformed(what: str) -> SearchError:
    return malformed("searxng", what, _HINT)


def _text(value: Any, field: str) -> str:
    return text_field(value, field, "searxng", _HINT)


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
        url = _text(item.get("url"), "url")
        content = _text(item.get("content"), "content")
        if not url or not content:
            continue  # nothing to cite or nothing to ground an answer on
        published = item.get("publishedDate")
        out.append(
            WebResult(
                title=_text(item.get("title"), "title") or url,
                url=url,
                content=content,
                snippet=clip(content, SNIPPET_CHARS),
                published=published if isinstance(published, str) else "",
                score=finite_score(item.get("score")),
                provider="searxng",
            )
        )
    return out


def _make(settings: CragSettings, deps: BackendDeps) -> SearxngSearch:
    s = settings.search
    return SearxngSearch(base_url=s.searxng_url, timeout=s.timeout, retries=s.retries, client=deps.client)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``searxng`` search provider."""
    registries.searches.register("searxng", _make)
