"""What the state layer (crag.state: SQLAlchemy Core + Alembic) costs on the SQLite default, and
what PostgreSQL costs: import time, opening a trace database, saving and listing traces,
charging a daily budget, cache reads and writes.

Each measurement runs in a fresh process against the sources given with ``--src``, so the
code before the state layer can be measured the same way (a checkout of it, e.g. main before
the merge)::

    python benchmarks/state_overhead.py                                 # this checkout, SQLite
    python benchmarks/state_overhead.py --src /path/to/old/src --label before
    python benchmarks/state_overhead.py --postgres                      # also a local PostgreSQL

Writes ``benchmarks/out/state_overhead-<label>.json`` and prints a table of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh process: time one import, then each operation; print JSON.
PROBE = r"""
import json, sys, tempfile, time
from pathlib import Path
t0 = time.perf_counter()
import crag.engine  # what every CLI command that touches a knowledge base imports
imported = time.perf_counter() - t0
from crag.budget import Budget
from crag.search.cache import CachedSearch
from crag.testing.fakes import StaticWebSearch
from crag.trace.store import TraceStore
from crag.types import WebResult
target = sys.argv[1]
n = int(sys.argv[2])
tmp = Path(tempfile.mkdtemp())

def where(file):
    if target == "sqlite":
        return tmp / file
    from crag.state import GROUPS, StateDB
    group = {"traces.sqlite": "traces", "budget.sqlite": "budget", "c.sqlite": "cache"}[file]
    return StateDB(target, GROUPS[group], scope="bench")

out = {"import_engine_s": imported}
t = time.perf_counter(); store = TraceStore(where("traces.sqlite")); out["open_new_traces_s"] = time.perf_counter() - t
trace = {"question": "天津犹太会堂是什么时候建成的？", "answer": "1940年[1]。", "action": "correct", "confidence": 0.9,
         "context": [{"text": "天津犹太会堂建成于1940年。" * 20, "source": "a.md"}] * 5, "timings": {"total": 1.0}}
t = time.perf_counter()
for i in range(n):
    store.save({**trace, "id": f"20260101000000-{i:06d}"})
out["trace_save_ms"] = (time.perf_counter() - t) / n * 1000
t = time.perf_counter()
for _ in range(n):
    store.list(limit=20)
out["trace_list20_ms"] = (time.perf_counter() - t) / n * 1000
t = time.perf_counter()
for i in range(n):
    store.get(f"20260101000000-{i:06d}")
out["trace_get_ms"] = (time.perf_counter() - t) / n * 1000
t = time.perf_counter(); TraceStore(where("traces.sqlite")); out["open_existing_traces_s"] = time.perf_counter() - t
t = time.perf_counter()
for _ in range(n):
    Budget(where("budget.sqlite"), per_day_tokens=10**12).charge_tokens(100)  # one Budget per request
out["budget_charge_ms"] = (time.perf_counter() - t) / n * 1000
inner = StaticWebSearch([WebResult("t", "https://example.org/x", "c" * 500)] * 5)
cache = CachedSearch(inner, where("c.sqlite"), ttl_seconds=3600)
t = time.perf_counter()
for i in range(n):
    cache.search(f"query {i}", k=5)
out["cache_miss_put_ms"] = (time.perf_counter() - t) / n * 1000
t = time.perf_counter()
for i in range(n):
    cache.search(f"query {i}", k=5)
out["cache_hit_ms"] = (time.perf_counter() - t) / n * 1000
print(json.dumps(out))
"""


def run(src: Path, target: str, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", PROBE, target, str(n)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    result: dict[str, float] = json.loads(done.stdout)
    return result


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the crag sources to measure")
    ap.add_argument("--label", default="current")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per target (medians reported)")
    ap.add_argument("-n", type=int, default=200, help="operations of each kind per process")
    ap.add_argument("--postgres", action="store_true", help="also measure a local PostgreSQL (needs crag[postgres])")
    args = ap.parse_args()
    results = {"sqlite": medians([run(args.src, "sqlite", args.n) for _ in range(args.runs)])}
    if args.postgres:
        sys.path.insert(0, str(ROOT / "src"))
        from crag.testing.postgres_server import LocalPostgres

        with LocalPostgres() as pg:
            runs = [run(args.src, pg.create_database(f"bench_{i}"), args.n) for i in range(args.runs)]
            results["postgres"] = medians(runs)
    out = ROOT / "benchmarks" / "out" / f"state_overhead-{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"src": str(args.src), "runs": args.runs, "n": args.n, **results}, indent=2))
    keys = list(results["sqlite"])
    print(f"{'median of ' + str(args.runs) + ' processes':28}" + "".join(f"{t:>12}" for t in results))
    for key in keys:
        print(f"{key:28}" + "".join(f"{results[t][key]:12.3f}" for t in results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
