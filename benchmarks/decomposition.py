"""Parallel sub-query search: 4 sub-queries must cost ≤ 1.3× one query.

A local SearXNG-shaped server on 127.0.0.1 (``crag.testing.searxng``) sleeps 300 ms per
request (a slow web search); the real ``SearxngSearch`` provider queries it. The question is decomposed by the rules
and its sub-queries go through ``search_parallel``.

    python benchmarks/decomposition.py [--delay 0.3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import httpx

from crag.correct.decompose import decompose, search_parallel
from crag.search.searxng import SearxngSearch
from crag.testing.searxng import LocalSearxng
from crag.types import Query

RESULTS = Path(__file__).resolve().parent / "out"
QUESTION = "What is the population of France, Germany, Italy and Spain?"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with LocalSearxng(delay=args.delay, results=5) as server:
        search = SearxngSearch(base_url=server.url, retries=0, client=httpx.Client())
        subqueries = decompose(Query.of(QUESTION)).subqueries
        search.search("warm up", k=1)  # connection set-up is not what we compare
        one: list[float] = []
        many: list[float] = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            search_parallel([QUESTION], search, k=5, timeout=10.0)
            one.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            out = search_parallel(subqueries, search, k=5, timeout=10.0).results
            many.append(time.perf_counter() - t0)
    ratio = statistics.median(many) / statistics.median(one)
    report = {
        "question": QUESTION,
        "subqueries": subqueries,
        "server_delay_s": args.delay,
        "repeat": args.repeat,
        "one_query_median_s": round(statistics.median(one), 4),
        "subqueries_median_s": round(statistics.median(many), 4),
        "ratio": round(ratio, 3),
        "results_per_run": len(out),
        "target": "ratio <= 1.3",
        "pass": ratio <= 1.3,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "decomposition.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
