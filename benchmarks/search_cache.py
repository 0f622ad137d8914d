"""Search cache: latency of a cache hit against a miss on a slow (300 ms) local search server.

Target: a hit costs ≤ 10% of a miss. Misses use fresh queries; hits repeat them.

    python benchmarks/search_cache.py [--delay 0.3] [--n 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from decomposition import SleepingSearxng  # the same sleeping server, next to this file

from crag.search.cache import CachedSearch
from crag.search.searxng import SearxngSearch

RESULTS = Path(__file__).resolve().parent / "out"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.3)
    ap.add_argument("--n", type=int, default=10)
    args = ap.parse_args()
    server = SleepingSearxng(args.delay)
    with tempfile.TemporaryDirectory() as tmp:
        inner = SearxngSearch(base_url=server.url, retries=0, client=httpx.Client())
        cached = CachedSearch(inner, Path(tmp) / "search_cache.sqlite", ttl_seconds=86400)
        inner.search("warm up", k=1)
        queries = [f"question number {i}" for i in range(args.n)]
        miss, hit = [], []
        for q in queries:
            t0 = time.perf_counter()
            cached.search(q, k=5)
            miss.append(time.perf_counter() - t0)
        for q in queries:
            t0 = time.perf_counter()
            cached.search(q, k=5)
            hit.append(time.perf_counter() - t0)
        cached.close()
    server.close()
    ratio = statistics.median(hit) / statistics.median(miss)
    report = {
        "server_delay_s": args.delay,
        "queries": args.n,
        "miss_median_ms": round(statistics.median(miss) * 1000, 2),
        "hit_median_ms": round(statistics.median(hit) * 1000, 3),
        "hit_max_ms": round(max(hit) * 1000, 3),
        "hit_over_miss": round(ratio, 4),
        "provider_requests": server.requests,
        "target": "hit <= 10% of miss",
        "pass": ratio <= 0.10,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "search_cache.json").write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
