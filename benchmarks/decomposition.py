"""Parallel sub-query search: 4 sub-queries must cost ≤ 1.3× one query.

A local SearXNG-shaped server on 127.0.0.1 sleeps 300 ms per request (a slow web search);
the real ``SearxngSearch`` provider queries it. The question is decomposed by the rules
and its sub-queries go through ``search_parallel``.

    python benchmarks/decomposition.py [--delay 0.3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx

from crag.correct.decompose import decompose, search_parallel
from crag.search.searxng import SearxngSearch

RESULTS = Path(__file__).resolve().parent / "results"
QUESTION = "What is the population of France, Germany, Italy and Spain?"


class SleepingSearxng:
    """SearXNG JSON on 127.0.0.1 that sleeps ``delay`` seconds per request."""

    def __init__(self, delay: float) -> None:
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                q = parse_qs(urlsplit(self.path).query).get("q", [""])[0]
                time.sleep(delay)
                body = json.dumps(
                    {
                        "query": q,
                        "results": [
                            {
                                "title": f"{q} {i}",
                                "url": f"https://example.org/{i}/{abs(hash(q))}",
                                "content": f"Result {i} about {q}.",
                            }
                            for i in range(5)
                        ],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    server = SleepingSearxng(args.delay)
    search = SearxngSearch(base_url=server.url, retries=0, client=httpx.Client())
    subqueries = decompose(QUESTION).subqueries
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
    server.close()
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
