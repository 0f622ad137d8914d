"""Load test of the HTTP service: N concurrent ``POST /v1/ask`` on loopback against uvicorn.

Starts the real server (``uvicorn --factory``, 1 or more worker processes) over a small
knowledge base, fires ``--requests`` questions at once with ``httpx.AsyncClient``, and
reports errors, throughput, p50/p99 latency and the peak RSS of the server process tree.

    python benchmarks/load_server.py --fake-llm --requests 200 --workers 1 2
    python benchmarks/load_server.py --requests 40 --workers 1 2      # embedded 0.5B LLM

Defaults keep the real-LLM run feasible on 2 cores: the bundled 0.5B model with
``max_tokens=32``. ``--fake-llm`` swaps only the LLM for an instant fixed answer, so the
figures are the server plus the rest of the pipeline (embedding, hybrid retrieval,
evaluator, trace writes). Each worker process loads its own models, and with the
embedded LLM the cores are split between workers (``n_threads = cores // workers``) so
two workers do not oversubscribe the CPU.

Only 127.0.0.1 is used; every request has a total timeout and the whole run a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crag.testing.net import free_port
from crag.testing.processes import wait_ready

ROOT = Path(__file__).resolve().parents[1]
CONFIG_ENV = "CRAG_LOADBENCH_CONFIG"  # hands the run's settings to every worker process
DOCS = [
    {"text": "天津犹太会堂建成于1940年，位于天津市和平区，是中国现存的犹太教会堂之一。", "title": "天津犹太会堂"},
    {
        "text": "The Tianjin Synagogue was completed in 1940 and stands in Heping District, Tianjin.",
        "title": "Tianjin Synagogue",
    },
    {
        "text": "CRAG (Corrective Retrieval Augmented Generation) grades retrieved documents with an "
        "evaluator and corrects retrieval with web search when confidence is low.",
        "title": "CRAG overview",
    },
    {"text": "BM25 is a keyword ranking function used by search engines.", "title": "BM25"},
    {"text": "Chroma is an embedding database that stores vectors with their documents.", "title": "Chroma"},
]
QUESTIONS = [
    "When was the Tianjin Synagogue completed?",
    "天津犹太会堂是什么时候建成的？",
    "What does CRAG do with retrieved documents?",
    "What is BM25?",
]


# -- server side: the app factory uvicorn imports in each worker --------------------------
class InstantLLM:
    """The ``--fake-llm`` backend: a fixed cited answer, no model, no delay."""

    model_id = "bench-instant"

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Any:
        from crag.protocols import Completion

        return Completion("The answer is in the first source [1].", prompt_tokens=100, completion_tokens=9)


def worker_app() -> Any:
    """uvicorn ``--factory`` entry point: settings come from ``CRAG_LOADBENCH_CONFIG``."""
    from crag.config import CragSettings
    from crag.engine import CRAG
    from crag.registry import LLMS
    from crag.server.app import create_app

    config = json.loads(os.environ[CONFIG_ENV])
    if config["fake_llm"]:
        LLMS.register("bench-instant", lambda settings, deps: InstantLLM())
    # No API keys: the service then answers loopback clients only, which is all we use.
    return create_app(CRAG(CragSettings(**config["settings"])), api_keys=[])


def settings_for(kb: Path, *, fake_llm: bool, model: str, max_tokens: int, n_threads: int) -> dict[str, Any]:
    llm: dict[str, Any] = (
        {"backend": "bench-instant"}
        if fake_llm
        else {"backend": "llama-cpp", "model": model, "max_tokens": max_tokens, "n_threads": n_threads}
    )
    return {"kb": {"path": str(kb)}, "llm": llm, "search": {"provider": "none"}}


def build_kb(root: Path) -> Path:
    from crag.config import CragSettings
    from crag.engine import CRAG

    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in DOCS) + "\n", encoding="utf-8")
    kb = root / "kb"
    CRAG(CragSettings(kb={"path": kb}, search={"provider": "none"})).ingest([src])
    return kb


# -- client side ----------------------------------------------------------------------------


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (psutil if installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        return _proc_tree_rss(pid)
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def _proc_tree_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


class RssSampler:
    """Samples the server tree's RSS every 100 ms in a thread; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(0.1)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.peak = max(self.peak, tree_rss(self.pid))


async def fire(base: str, n: int, timeout_s: float, deadline_s: float) -> dict[str, Any]:
    """Send ``n`` asks at once; return latencies (s), errors and wall time."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(timeout_s), limits=limits) as client:

        async def one(i: int) -> None:
            t0 = time.perf_counter()
            try:
                r = await client.post("/v1/ask", json={"question": QUESTIONS[i % len(QUESTIONS)]})
                if r.status_code != 200 or not r.json().get("answer"):
                    errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                    return
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(one(i)) for i in range(n)]
        _, pending = await asyncio.wait(tasks, timeout=deadline_s)
        for task in pending:  # the run's deadline passed: count what is left as errors
            task.cancel()
            errors.append("deadline exceeded")
        wall = time.perf_counter() - t0
    return {"latencies": latencies, "errors": errors, "wall_s": wall}


def run_one(kb: Path, args: argparse.Namespace, workers: int) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    settings = settings_for(
        kb, fake_llm=args.fake_llm, model=args.model, max_tokens=args.max_tokens, n_threads=max(1, cores // workers)
    )
    env = os.environ | {CONFIG_ENV: json.dumps({"fake_llm": args.fake_llm, "settings": settings})}
    env.setdefault("CRAG_CACHE_DIR", str(ROOT / ".cache" / "crag"))
    env.pop("CRAG_API_KEYS", None)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable, "-m", "uvicorn", "--factory", "load_server:worker_app",
        "--app-dir", str(Path(__file__).parent), "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env)
    try:
        wait_ready(proc, f"{base}/healthz", 120, "the load-test server")
        # Warm every worker (models load on first use): a burst wide enough to reach each.
        warm = asyncio.run(fire(base, 4 * workers, args.timeout, args.timeout * 2))
        if warm["errors"]:
            raise RuntimeError(f"warm-up failed: {warm['errors'][:3]}")
        with RssSampler(proc.pid) as rss:
            result = asyncio.run(fire(base, args.requests, args.timeout, args.deadline))
        lat = sorted(result["latencies"])
        q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else lat * 99
        return {
            "llm": "fake (instant)" if args.fake_llm else f"{args.model} max_tokens={args.max_tokens}",
            "workers": workers,
            "requests": args.requests,
            "ok": len(lat),
            "errors": len(result["errors"]),
            "error_samples": result["errors"][:3],
            "wall_s": round(result["wall_s"], 2),
            "throughput_rps": round(len(lat) / result["wall_s"], 2) if result["wall_s"] else 0.0,
            "p50_ms": round(q[49] * 1000, 1) if lat else None,
            "p99_ms": round(q[98] * 1000, 1) if lat else None,
            "max_ms": round(lat[-1] * 1000, 1) if lat else None,
            "peak_rss_mb": round(rss.peak / 2**20, 1),
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="concurrent /v1/ask requests (default 200)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="uvicorn worker counts to compare")
    parser.add_argument("--fake-llm", action="store_true", help="instant fixed answers: measure the server")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="bundled model for the real-LLM run")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=None, help="per-request total timeout, seconds")
    parser.add_argument("--deadline", type=float, default=None, help="whole-burst deadline, seconds")
    parser.add_argument("--kb", type=Path, help="reuse this knowledge base instead of building one")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.requests < 1 or any(w < 1 for w in args.workers):
        parser.error("--requests and --workers must be >= 1")
    # Real generation is serialised per worker: allow ~5 s per request in the worst case.
    args.timeout = args.timeout or (120.0 if args.fake_llm else max(120.0, 5.0 * args.requests))
    args.deadline = args.deadline or args.timeout + 30

    with tempfile.TemporaryDirectory(prefix="crag-load-") as tmp:
        kb = args.kb or build_kb(Path(tmp))
        results = [run_one(kb, args, w) for w in args.workers]
    print(f"{'llm':<34} {'workers':>7} {'ok':>5} {'err':>4} {'rps':>8} {'p50 ms':>9} {'p99 ms':>9} {'RSS MB':>8}")
    for r in results:
        print(
            f"{r['llm']:<34} {r['workers']:>7} {r['ok']:>5} {r['errors']:>4} {r['throughput_rps']:>8} "
            f"{r['p50_ms']!s:>9} {r['p99_ms']!s:>9} {r['peak_rss_mb']:>8}"
        )
        for sample in r["error_samples"]:
            print(f"    error: {sample}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0 if all(r["errors"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
