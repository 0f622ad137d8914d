"""The answer cache: server-side latency of a repeated question answered through another replica
(a cache hit) against a full answer.

Two replicas (two engines, each with its own working folder holding the same documents)
share one state database: a PostgreSQL started here from Debian's ``postgresql`` (``--sqlite``
shares one SQLite file instead, one machine only). Replica 1 answers each question in full
(``no_cache``: the pipeline runs end to end, with the bundled model); replica 2 is then asked
the same question over HTTP (``POST /v1/ask`` in process, FastAPI's ASGI app) and answers from
the cache. Server-side time is the request's own, from its trace (``timings.total``: from the
engine receiving the question to the answer, the cache lookup and the document checks
included), and the wall time of the HTTP request in process beside it.

    python benchmarks/answer_cache.py [--model qwen2.5-coder-0.5b] [--full 3] [--hits 30]

Writes ``benchmarks/out/answer_cache.json`` and prints the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the end-to-end test's small corpus

QUESTIONS = [
    "When was the Bell Rock Lighthouse built?",
    "Who designed the Bell Rock Lighthouse?",
    "Where is the Bell Rock Lighthouse?",
]


@contextlib.contextmanager
def state_uri(sqlite: bool) -> Iterator[str]:
    """A PostgreSQL database both replicas share ("" for SQLite: replica 2 reads replica 1's file)."""
    if sqlite:
        yield ""
        return
    from crag.testing.postgres_server import LocalPostgres

    with LocalPostgres() as pg:
        yield pg.create_database("bench_answer_cache")


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--full", type=int, default=3, help="full answers (questions, cycled)")
    ap.add_argument("--hits", type=int, default=30, help="cache hits through replica 2")
    ap.add_argument("--sqlite", action="store_true", help="share a SQLite file instead of PostgreSQL")
    args = ap.parse_args()

    from fastapi.testclient import TestClient

    from crag import CRAG
    from crag.server.app import create_app
    from test_answer_cache_e2e import write_docs

    work = Path(tempfile.mkdtemp(prefix="answer-cache-"))
    docs = write_docs(work / "docs")
    with state_uri(args.sqlite) as uri:

        def replica(n: int) -> CRAG:
            kb: dict[str, Any] = {"path": work / f"replica{n}" / "kb", "name": "handbook"}
            if uri:
                kb["state_uri"] = uri
            else:
                kb["path"] = work / "kb"  # one folder: its search_cache.sqlite is the shared file
            return CRAG.from_config(
                kb=kb,
                search={"provider": "none"},
                llm={"model": args.model, "max_tokens": 96},
                correction={"answer_cache_ttl": 3600},
            )

        one, two = replica(1), replica(2)
        one.ingest([docs])
        if uri:
            two.ingest([docs])
        one.ask(QUESTIONS[0], no_cache=True)  # load the models: not counted

        full: list[float] = []
        for i in range(args.full):
            answer = one.ask(QUESTIONS[i % len(QUESTIONS)])  # miss (or a refresh): the whole pipeline
            full.append(answer.timings["total"])
        hits: list[float] = []
        walls: list[float] = []
        statuses: list[bool] = []
        key = "bench-key-0123456789"
        with TestClient(create_app(two, api_keys=[key]), headers={"Authorization": f"Bearer {key}"}) as client:
            for i in range(args.hits):
                q = QUESTIONS[i % min(args.full, len(QUESTIONS))]
                t = time.perf_counter()
                body = client.post("/v1/ask", json={"question": q}).json()
                assert "timings" in body, body
                walls.append(time.perf_counter() - t)
                statuses.append(bool(body.get("cache", {}).get("hit")))
                hits.append(float(body["timings"]["total"]))
    result = {
        "state": "sqlite" if args.sqlite else "postgresql",
        "model": args.model,
        "full_answers": len(full),
        "full_p50_ms": p50(full),
        "hits": len(hits),
        "hit_rate": sum(statuses) / len(statuses),
        "hit_p50_ms": p50(hits),
        "hit_http_wall_p50_ms": p50(walls),
        "hit_p95_ms": round(sorted(hits)[int(0.95 * (len(hits) - 1))] * 1000, 1),
    }
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "answer_cache.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
