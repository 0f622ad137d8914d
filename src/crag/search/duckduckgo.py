"""DuckDuckGo (via the ``ddgs`` metasearch package): keyless web search.

``ddgs`` is optional (``pip install 'crag[web]'``) and imported on first search, so the
registry can list the provider without it. The library has its own per-engine timeout but
aggregates several engines, so a call can outlive it: each search runs in a daemon thread
and is abandoned (reported as a ``SearchError``) once ``timeout`` seconds have passed.
"""

from __future__ import annotations

import html
import re
from typing import Any

from crag.config import CragSettings
from crag.deadline import with_deadline
from crag.errors import SearchError
from crag.extras import require
from crag.redact import clip
from crag.registry import BackendDeps, Registries
from crag.types import WebResult

SNIPPET_CHARS = 300
_TAG = re.compile(r"<[^>]+>")


class DuckDuckGoSearch:
    """Search DuckDuckGo and friends through ``ddgs.DDGS().text`` with a hard deadline.

    ### Usage example
    >>> search = DuckDuckGoSearch(timeout=5.0, region="cn-zh")   # doctest: +SKIP
    >>> [r.url for r in search.search("中国的首都", k=3)]          # doctest: +SKIP
    ['https://zh.wikipedia.org/wiki/北京', ...]
    """

    name = "duckduckgo"

    def __init__(self, *, timeout: float = 10.0, region: str = "us-en", backend: str = "auto") -> None:
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        self.timeout = timeout
        self.region = region
        self.backend = backend

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """Up to ``k`` results with a non-empty body, in the library's order."""
        if k < 1:
            raise ValueError("k must be >= 1")
        if not query.strip():
            return []
        try:
            raw = with_deadline(
                lambda: self._call(query, k),
                self.timeout,
                what="duckduckgo:",
                hint="try again later or raise search.timeout",
                backend_id="duckduckgo",
            )
        except SearchError:
            raise
        except Exception as exc:  # ddgs raises its own types (rate limits, engine timeouts): one line
            raise _failed(exc) from None
        return _parse(raw)[:k]

    def _call(self, query: str, k: int) -> Any:
        ddgs_cls = _ddgs_class()
        # ddgs takes an int timeout (per engine); keep it inside our own deadline.
        per_engine = max(1, int(self.timeout))
        return ddgs_cls(timeout=per_engine).text(query, region=self.region, max_results=k, backend=self.backend)

    def __repr__(self) -> str:
        return f"DuckDuckGoSearch(region={self.region!r}, timeout={self.timeout:g})"


def _ddgs_class() -> Any:
    try:
        import ddgs
    except ImportError:
        raise SearchError(
            "duckduckgo: the 'ddgs' package is not installed; run: pip install 'crag[web]'",
            backend_id="duckduckgo",
            step="search",
        ) from None
    return ddgs.DDGS


def _failed(exc: Exception) -> SearchError:
    kind = type(exc).__name__
    detail = clip(" ".join(str(exc).split()), 160)
    hint = "rate limited; wait a minute" if "ratelimit" in kind.lower() else "try again later"
    return SearchError(f"duckduckgo: search failed ({kind}: {detail}); {hint}", backend_id="duckduckgo", step="search")


def _malformed(what: str) -> SearchError:
    return SearchError(
        f"duckduckgo: malformed result from ddgs ({what}); upgrade ddgs or pick another provider",
        backend_id="duckduckgo",
        step="search",
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _malformed("title, href and body must be strings")
    # Some engines behind ddgs return HTML fragments and entities in snippets.
    return " ".join(html.unescape(_TAG.sub("", value)).split())


def _parse(raw: Any) -> list[WebResult]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _malformed("expected a list")
    out: list[WebResult] = []
    for item in raw:
        if not isinstance(item, dict):
            raise _malformed("a result is not a dict")
        url = _text(item.get("href") or item.get("url"))
        body = _text(item.get("body"))
        if not url or not body:
            continue  # nothing to cite or nothing to ground an answer on
        published = item.get("date")
        out.append(
            WebResult(
                title=_text(item.get("title")) or url,
                url=url,
                content=body,
                snippet=clip(body, SNIPPET_CHARS),
                published=published if isinstance(published, str) else "",
                score=None,  # ddgs gives no relevance score; order is its ranking
                provider="duckduckgo",
            )
        )
    return out


def _make(settings: CragSettings, deps: BackendDeps) -> DuckDuckGoSearch:
    # Chosen by name: a missing extra is a configuration error now, not a degraded answer per search.
    require("ddgs", "web", "the duckduckgo search provider")
    return DuckDuckGoSearch(timeout=settings.search.timeout)


def register(registries: Registries) -> None:
    """Plugin entry point: the keyless ``duckduckgo`` (``ddg``) search provider."""
    registries.searches.register("duckduckgo", _make, aliases=("ddg",))
