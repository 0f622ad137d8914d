"""Hang-up to free: how soon a client that hangs up frees the model, per kind of client.

A real ``crag serve`` process (uvicorn, the embedded model, search none) over the shipped
sample's internal documents. Each cancellation asks a question whose answer takes several
sentences, hangs up after a random delay (seeded, uniform from 0.5 s to 3 s past the idle
server's first token: during retrieval, while the prompt is read, or while the answer is
written, whatever the machine's speed), and at once sends the next question. Per
cancellation:

* **free**: the hang-up until the model was free: the end of the run's last span that holds
  the model (``generate``; ``condense``, ``verify``, ``rewrite``, ``compress`` when they run),
  which closes after the model's lock is released; 0 when the run stopped before taking it.
  **stopped**: the hang-up until the run's last span ended (retrieval on a busy CPU included);
* **next**: the hang-up until the next question's first ``token`` event, less the same
  question's first token on an idle server whose model last read another prompt, measured
  before each kind (what the hang-up cost the next question);
* **block**: how long the model takes here and now to read one block of 128 prompt tokens
  (the same model and threads, timed in this process while the server is idle, before and
  after each kind): the model stops between two pieces, so on a busy machine the figures
  above scale with it;
* the trace's status (``cancelled``, or ``answered`` when the answer was complete before the
  hang-up: not counted) and whether the server's log has the request's access line.

Client kinds: ``/v1/ask`` server-sent events (``ask-sse``), the OpenAI chat stream
(``chat-stream``), a non-streamed ``/v1/ask`` (``ask-json``) on raw sockets, and the chat page
``/ui/chat`` in headless Chromium whose tab is closed (``chat-page``).

    python benchmarks/cancel.py [--per-kind 20] [--model qwen2.5-coder-1.5b] [--threads 0]

Writes ``benchmarks/out/cancel.json``; the figures go to benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import httpx

from crag.config import CragSettings
from crag.testing.processes import crag_serve

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
KINDS = ("ask-sse", "chat-stream", "ask-json", "chat-page")
QUESTIONS = [  # long answers from the sample's internal documents
    "请详细介绍天津犹太会堂：它的历史、建筑风格、谁建造的、现在的用途。",
    "What happened to Warsaw between 1796 and 1816? Answer in three sentences.",
    "庆大霉素主要被用来治疗什么？请详细说明它的用途和商品名。",
    "Describe the Yuan dynasty: who founded it, when, and what came after it.",
]
NEXT_QUESTION = "天津犹太会堂是什么时候建成的？"
PHASES = ("before generation", "reading the prompt", "writing")
MODEL_SPANS = {"condense", "verify", "rewrite", "compress", "generate"}  # steps that hold the model


class Bench:
    """The server under test and what each cancellation left."""

    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log
        self.port = int(url.rsplit(":", 1)[1])
        self.http = httpx.Client(base_url=url, timeout=600)
        self.seen: set[str] = set()

    def trace_of(self, question: str, timeout: float = 600) -> dict[str, Any]:
        """The newest trace of ``question`` not seen before (saved when its run ended)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for row in self.http.get("/v1/traces", params={"limit": 20}).json()["traces"]:
                if row["question"] == question and row["id"] not in self.seen:
                    self.seen.add(row["id"])
                    trace: dict[str, Any] = self.http.get(f"/v1/traces/{row['id']}").json()
                    return trace
            time.sleep(0.05)
        raise RuntimeError(f"no trace of {question!r} within {timeout:g}s")

    def first_token(self, since: float) -> float:
        """Ask the next question (streamed); seconds from ``since`` to its first ``token`` event.

        The rest of its answer is not needed: it is left there (a hang-up too), and its run has
        stopped when its trace is saved, before the next cancellation starts."""
        first = float("nan")
        with self.http.stream("POST", "/v1/ask", json={"question": NEXT_QUESTION, "stream": True}) as r:
            for line in r.iter_lines():
                if line == "event: token":
                    first = time.time() - since
                    break
        self.trace_of(NEXT_QUESTION)
        return first

    def idle_first_token(self, other: str) -> float:
        """The next question's first token on an idle server, the model's cache holding ``other``'s prompt."""
        with self.http.stream("POST", "/v1/ask", json={"question": other, "stream": True}) as r:
            for line in r.iter_lines():
                if line == "event: token":
                    break
        self.trace_of(other)  # its run has stopped
        return self.first_token(time.time())

    def logged(self, pattern: str) -> int:
        return len(re.findall(pattern, self.log.read_text("utf-8", errors="replace")))


Client = Callable[[Bench, str, float], tuple[float, str, int]]  # -> hang-up time, its log line, lines before


def raw_client(path: str, stream: bool) -> Client:
    """A client on a raw socket that hangs up ``delay`` seconds after sending its request."""

    def ask(bench: Bench, question: str, delay: float) -> tuple[float, str, int]:
        if path == "/v1/chat/completions":
            body: dict[str, Any] = {"model": "crag", "messages": [{"role": "user", "content": question}]}
        else:
            body = {"question": question}
        data = json.dumps(body | {"stream": stream}).encode()
        sock = socket.create_connection(("127.0.0.1", bench.port), timeout=600)
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        time.sleep(delay)
        port = sock.getsockname()[1]
        hung_up = time.time()
        sock.close()
        return hung_up, rf'127\.0\.0\.1:{port} - "POST {re.escape(path)} HTTP/1\.1" (200|499)', 0

    return ask


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            yield b
        finally:
            b.close()


def page_client(chromium: Any) -> Client:
    """The chat page: the question sent with Enter, the tab closed ``delay`` seconds later."""
    line = r'"POST /v1/chat/completions HTTP/1\.1" (200|499)'  # the next question goes to /v1/ask

    def ask(bench: Bench, question: str, delay: float) -> tuple[float, str, int]:
        before = bench.logged(line)
        page = chromium.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{bench.url}/ui/chat")
        page.wait_for_selector("#model option", state="attached")
        box = page.locator("#chat-form textarea")
        box.fill(question)
        with page.expect_request(lambda r: r.url.endswith("/v1/chat/completions")):
            box.press("Enter")
        sent = time.time()
        time.sleep(max(0.0, delay - (time.time() - sent)))
        hung_up = time.time()
        page.close()
        return hung_up, line, before

    return ask


class BlockTimer:
    """Times one 128-token prompt block of the served model, in this process."""

    def __init__(self, model: str, threads: int) -> None:
        from crag.llm.llama_cpp import LlamaCppLLM

        self.llm = LlamaCppLLM(model, n_ctx=512, n_threads=threads)
        self.llm.warm_up()

    def __call__(self) -> float:
        from crag.llm.prefix_cache import PROMPT_CHUNK

        llama = self.llm._loaded.llama  # type: ignore[union-attr]
        text = " ".join(QUESTIONS) * 20
        tokens = llama.tokenize(text.encode(), add_bos=False)[:PROMPT_CHUNK]
        llama.n_tokens = 0
        start = time.monotonic()
        llama.eval(tokens)
        return round(time.monotonic() - start, 3)


def phase(trace: dict[str, Any], hung_up: float) -> str:
    """Where the run was when its client left: before generation, reading the prompt, writing."""
    spans = trace["spans"]
    start = min(s["start"] for s in spans)
    generate = next((s for s in spans if s["name"] == "generate"), None)
    if generate is None or generate["start"] > hung_up:
        return "before generation"
    first = (trace.get("stream") or {}).get("first_token_s")
    return "writing" if first is not None and start + first < hung_up else "reading the prompt"


def run_kind(bench: Bench, kind: str, client: Client, n: int, rng: random.Random, idle: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while len([r for r in rows if r["status"] == "cancelled"]) < n and len(rows) < 2 * n:
        question = QUESTIONS[len(rows) % len(QUESTIONS)]
        delay = round(rng.uniform(0.5, idle + 3.0), 2)
        hung_up, line, before = client(bench, question, delay)
        nxt = bench.first_token(hung_up)
        trace = bench.trace_of(question)
        ends = {s["name"]: s["start"] + s["duration_ms"] / 1000 - hung_up for s in trace["spans"]}
        row = {
            "kind": kind,
            "delay_s": delay,
            "status": trace["status"],
            "phase": phase(trace, hung_up),
            "free_s": round(max([0.0] + [t for name, t in ends.items() if name in MODEL_SPANS]), 3),
            "stopped_s": round(max(ends.values()), 3),
            "next_first_token_s": round(nxt, 3),
            "next_delayed_s": round(nxt - idle, 3),
            "logged": bench.logged(line) > before,
        }
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    return rows


def summarise(kind: str, rows: list[dict[str, Any]], blocks: list[float]) -> dict[str, Any]:
    done = [r for r in rows if r["status"] == "cancelled"]
    free = sorted(r["free_s"] for r in done)
    nxt = sorted(r["next_delayed_s"] for r in done)

    def pct(xs: list[float], q: float) -> float:
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else float("nan")

    return {
        "kind": kind,
        "cancelled": len(done),
        "finished_before_the_hang_up": len(rows) - len(done),
        "other_status": sorted({r["status"] for r in rows} - {"cancelled", "answered", "degraded", "refused"}),
        "free_p50_s": round(statistics.median(free), 3) if free else None,
        "free_p90_s": pct(free, 0.9),
        "free_max_s": free[-1] if free else None,
        "stopped_p50_s": round(statistics.median(r["stopped_s"] for r in done), 3) if done else None,
        "next_delayed_p50_s": round(statistics.median(nxt), 3) if nxt else None,
        "access_lines": f"{sum(r['logged'] for r in done)}/{len(done)}",
        "block_s": blocks,
        "phases": {p: sum(r["phase"] == p for r in done) for p in PHASES},
        "free_p50_by_phase_s": {
            p: round(statistics.median(r["free_s"] for r in done if r["phase"] == p), 3)
            for p in PHASES
            if any(r["phase"] == p for r in done)
        },
        "rows": rows,
    }


def sample_kb(folder: Path) -> Path:
    kb = folder / "kb"
    if not (kb / "manifest.sqlite").is_file():
        subprocess.run([sys.executable, "-m", "crag.cli", "ingest", str(ROOT / "data" / "sample" / "internal"),
                        "--kb", str(kb)], check=True, capture_output=True)  # fmt: skip
    return kb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-kind", type=int, default=20, help="cancellations per client kind")
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--model", default="", help="LLM (default: the bundled default model)")
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: all cores)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=OUT / "cancel")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CRAG_CACHE_DIR", str(ROOT / ".cache" / "crag"))
    env = {"CRAG_SEARCH__PROVIDER": "none", "CRAG_LLM__N_THREADS": str(args.threads)}
    if args.model:
        env["CRAG_LLM__MODEL"] = args.model
    log = args.out / "serve.log"
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M"), "load": os.getloadavg(), "kinds": []}
    model = args.model or CragSettings().llm.model
    timer = BlockTimer(model, args.threads)
    results |= {"model": model, "threads": args.threads}
    with crag_serve(sample_kb(args.out), env=env, log=log, timeout=600) as url:
        bench = Bench(url, log)
        bench.first_token(time.time())  # loads the model

        with browser() if "chat-page" in args.kinds else nullcontext() as chromium:
            clients = {
                "ask-sse": raw_client("/v1/ask", stream=True),
                "chat-stream": raw_client("/v1/chat/completions", stream=True),
                "ask-json": raw_client("/v1/ask", stream=False),
                "chat-page": page_client(chromium) if chromium is not None else None,
            }
            for kind in args.kinds:
                client = clients[kind]
                assert client is not None
                before = timer()
                idle = statistics.median(bench.idle_first_token(q) for q in QUESTIONS[:2])  # the load moves
                rows = run_kind(bench, kind, client, args.per_kind, rng, idle)
                results["kinds"].append(summarise(kind, rows, [before, timer()]) | {"idle_first_token_s": idle})
    results["load_after"] = os.getloadavg()
    (args.out / "cancel.json").write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")
    print("\n| client | cancelled | model free p50 / p90 / max (s) | free p50 by phase (s) | run stopped p50 (s) "
          "| next question delayed p50 (s) | one prompt block (s) | access lines |\n" + "|---" * 8 + "|")  # fmt: skip
    for k in results["kinds"]:
        by_phase = ", ".join(f"{p}: {v} ({k['phases'][p]})" for p, v in k["free_p50_by_phase_s"].items())
        print(f"| {k['kind']} | {k['cancelled']} | {k['free_p50_s']} / {k['free_p90_s']} / {k['free_max_s']} | "
              f"{by_phase} | {k['stopped_p50_s']} | {k['next_delayed_p50_s']} | "
              f"{' / '.join(map(str, k['block_s']))} | {k['access_lines']} |")  # fmt: skip


if __name__ == "__main__":
    main()
