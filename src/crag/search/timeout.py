"""``TimeoutSearch``: every search ends within its timeout and the request deadline."""

from __future__ import annotations

from crag.deadline import Deadline, with_deadline
from crag.protocols import WebSearch
from crag.types import WebResult

__all__ = ["TimeoutSearch"]


class TimeoutSearch:
    """Wrap a ``WebSearch`` so each call ends within ``timeout`` and the request ``deadline``.

    A timeout raises ``SearchError``, which the pipeline already turns into a degradation.

    ### Usage example
    >>> from crag.testing.fakes import StaticWebSearch
    >>> search = TimeoutSearch(StaticWebSearch([WebResult("t", "https://e.org", "c")]), timeout=2.0)
    >>> [r.url for r in search.search("q", k=1)]
    ['https://e.org']
    """

    def __init__(self, inner: WebSearch, *, timeout: float, deadline: Deadline | None = None) -> None:
        self.inner = inner
        self.timeout = timeout
        self.deadline = deadline or Deadline(None)
        self.name: str = getattr(inner, "name", "search")

    def search(self, query: str, *, k: int) -> list[WebResult]:
        """``inner.search`` with the per-call timeout capped by the request deadline."""
        budget = self.deadline.cap(self.timeout)
        return with_deadline(
            lambda: self.inner.search(query, k=k),
            budget,
            what=f"{self.name} search",
            backend_id=self.name,
        )
