"""Per-call timeouts and the request deadline (crag.deadline, crag.search.timeout)."""

from __future__ import annotations

import time

import pytest

from crag.correct.decompose import search_parallel
from crag.deadline import Deadline, with_deadline
from crag.errors import LLMError, SearchError
from crag.search.timeout import TimeoutSearch
from crag.testing.fakes import StaticWebSearch
from crag.trace.spans import Tracer
from crag.types import WebResult

pytestmark = pytest.mark.unit


class Hanging:
    name = "hanging"

    def search(self, query: str, *, k: int) -> list[WebResult]:
        time.sleep(2.0)
        return [WebResult("late", "https://e.org", "late")]


def test_with_deadline_returns_raises_and_times_out() -> None:
    assert with_deadline(lambda: 42, 1.0) == 42
    with pytest.raises(KeyError):
        with_deadline(lambda: {}["missing"], 1.0)  # the callee's own error, unchanged
    t0 = time.perf_counter()
    with pytest.raises(SearchError, match=r"timed out after 0\.2s"):
        with_deadline(lambda: time.sleep(2), 0.2, what="slow search")
    assert time.perf_counter() - t0 < 0.6
    with pytest.raises(LLMError, match="no time left"):
        with_deadline(lambda: 1, 0.0, error=LLMError, step="rewrite")


def test_worker_runs_in_the_callers_context() -> None:
    # A span opened in the worker nests under the caller's open span.
    tracer = Tracer()
    with tracer.span("rewrite"):
        with_deadline(lambda: tracer.span("llm").__enter__(), 1.0)
    assert tracer.spans[1].parent == "rewrite"


def test_deadline_counts_down() -> None:
    now = [100.0]
    d = Deadline(5, clock=lambda: now[0])
    assert d.remaining() == 5 and d.cap(10) == 5 and d.cap(2) == 2
    now[0] += 6
    assert d.expired() and d.remaining() == 0
    assert not Deadline(None).expired()
    with pytest.raises(ValueError):
        Deadline(-1)


def test_timeout_search_degrades_in_parallel_search() -> None:
    search = TimeoutSearch(Hanging(), timeout=0.3)
    t0 = time.perf_counter()
    out, degradations = search_parallel(["a"], search, k=1, timeout=5.0)
    assert out == [] and time.perf_counter() - t0 < 1.0
    assert "hanging search timed out after 0.3s" in degradations[0]


def test_timeout_search_respects_an_expired_request_deadline() -> None:
    inner = StaticWebSearch([WebResult("t", "https://e.org", "c")])
    search = TimeoutSearch(inner, timeout=5.0, deadline=Deadline(0))
    with pytest.raises(SearchError, match="no time left"):
        search.search("q", k=1)
    assert inner.queries == [] and search.name == "static"
