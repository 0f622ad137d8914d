"""The SQLite search and rewrite caches: hits, TTL, what is never cached, a real local server."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from crag.correct.decompose import search_parallel
from crag.errors import SearchError
from crag.search.cache import CachedSearch, RewriteCache
from crag.search.searxng import SearxngSearch
from crag.testing.fakes import StaticWebSearch
from crag.testing.searxng import LocalSearxng
from crag.types import WebResult

pytestmark = pytest.mark.unit

RESULTS = [WebResult("Paris", "https://example.org/paris", "Paris is the capital.", published="2024-01-02", score=0.5)]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_hit_returns_equal_results_without_calling_the_provider(tmp_path: Path) -> None:
    inner = StaticWebSearch(RESULTS)
    cached = CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=60)
    assert cached.search("capital", k=3) == RESULTS
    assert cached.search("  capital ", k=3) == RESULTS  # whitespace does not make a new key
    assert inner.queries == ["capital"] and (cached.hits, cached.misses) == (1, 1)
    assert cached.name == "static"


def test_key_includes_k_and_provider(tmp_path: Path) -> None:
    inner = StaticWebSearch(RESULTS)
    path = tmp_path / "c.sqlite"
    CachedSearch(inner, path, ttl_seconds=60).search("q", k=3)
    CachedSearch(inner, path, ttl_seconds=60).search("q", k=5)

    class Other(StaticWebSearch):
        name = "other"

    other = Other(RESULTS)
    CachedSearch(other, path, ttl_seconds=60).search("q", k=3)
    assert inner.queries == ["q", "q"] and other.queries == ["q"]


def test_entries_expire_after_ttl_and_persist_across_instances(tmp_path: Path) -> None:
    clock = Clock()
    inner = StaticWebSearch(RESULTS)
    CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=100, clock=clock).search("q", k=1)
    again = CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=100, clock=clock)
    clock.now += 99
    again.search("q", k=1)
    assert len(inner.queries) == 1
    clock.now += 2
    again.search("q", k=1)
    assert len(inner.queries) == 2
    clock.now += 500
    assert again.purge() == 1


def test_errors_and_empty_results_are_not_cached(tmp_path: Path) -> None:
    failing = StaticWebSearch(fail=True)
    cached = CachedSearch(failing, tmp_path / "c.sqlite", ttl_seconds=60)
    for _ in range(2):
        with pytest.raises(SearchError):
            cached.search("q", k=1)
    assert len(failing.queries) == 2
    empty = StaticWebSearch([])
    cached = CachedSearch(empty, tmp_path / "c.sqlite", ttl_seconds=60)
    cached.search("q", k=1)
    cached.search("q", k=1)
    assert len(empty.queries) == 2


def test_ttl_zero_disables_the_cache(tmp_path: Path) -> None:
    inner = StaticWebSearch(RESULTS)
    cached = CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=0)
    cached.search("q", k=1)
    cached.search("q", k=1)
    assert len(inner.queries) == 2 and not (tmp_path / "c.sqlite").exists()
    with pytest.raises(ValueError):
        CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=-1)


def test_rewrite_cache(tmp_path: Path) -> None:
    clock = Clock()
    cache = RewriteCache(tmp_path / "c.sqlite", ttl_seconds=10, clock=clock)
    calls: list[int] = []

    def compute() -> list[str]:
        calls.append(1)
        return ["eiffel tower height"]

    assert cache.cached("llm", ("q", "doc-1"), compute) == ["eiffel tower height"]
    assert cache.cached("llm", ("q", "doc-1"), compute) == ["eiffel tower height"]
    assert cache.get("llm", ("q", "doc-2")) is None and cache.get("keyword", ("q", "doc-1")) is None
    clock.now += 11
    cache.cached("llm", ("q", "doc-1"), compute)
    assert len(calls) == 2
    assert cache.cached("llm", ("other",), lambda: []) == [] and cache.get("llm", ("other",)) is None


def test_real_server_hit_is_much_faster_than_miss(tmp_path: Path) -> None:
    with LocalSearxng(delay=0.2) as server:
        inner = SearxngSearch(base_url=server.url, retries=0, client=httpx.Client())
        cached = CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=3600)
        t0 = time.perf_counter()
        miss = cached.search("normandy", k=3)
        miss_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        hit = cached.search("normandy", k=3)
        hit_s = time.perf_counter() - t0
        assert hit == miss and len(hit) == 3 and server.requests == 1
        assert hit_s <= 0.1 * miss_s, (hit_s, miss_s)


def test_cache_is_safe_under_parallel_search(tmp_path: Path) -> None:
    inner = StaticWebSearch(RESULTS)
    cached = CachedSearch(inner, tmp_path / "c.sqlite", ttl_seconds=60)
    queries = [f"q{i}" for i in range(8)]
    search_parallel(queries, cached, k=1, timeout=5.0)
    search_parallel(queries, cached, k=1, timeout=5.0)
    assert sorted(inner.queries) == sorted(queries) and cached.hits == 8
