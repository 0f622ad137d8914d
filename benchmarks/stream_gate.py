"""What a chat user sees (issue 32): every data/hard question streamed through ``/v1/chat/completions``.

Two servers run side by side on loopback, over the same knowledge base and external corpus,
and answer each question in turn (one at a time, so they never share the CPU):

* **gated**: this checkout. Its stream carries only verified sentences.
* **baseline**: the engine before the sentence gate (``--baseline-rev``, default b42910b),
  from a git worktree under ``benchmarks/out/``. Its stream carried the model's tokens as
  written; its first content chunk is "today's first token". The stream is closed right
  after that chunk; that engine still finished its answer, so the next question waits until
  its trace is saved (the two servers never share the CPU).

Per question, for the gated server: the streamed text against the answer the trace saved
(characters shown then withdrawn: the streamed text that is not a prefix of the saved
answer), the first verified sentence's arrival against the model's own first token in the
same request (the trace's ``stream`` timings), accuracy (gold contained), refusals, and
citation precision (the sentence with the gold cites a source that holds it).

    python benchmarks/stream_gate.py --kb KB --search-corpus data/hard/external [--limit N] [--lang en] [--per-lang N]

Each server embeds with its own cache (``CRAG_CACHE_DIR`` under ``--out``), empty at the start,
so neither finds vectors the other computed. Use a KB no earlier run has asked questions of
(its search cache would answer them).

Results append to ``benchmarks/out/stream_gate/results.jsonl`` (a rerun skips questions done);
the summary is printed and written to ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "stream_gate"
sys.path.insert(0, str(ROOT / "src"))

from crag.eval.metrics import cited_gold, context_recall, gold_match  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(src: Path, kb: Path, corpus: Path, log: Path, cache: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = os.environ | {
        "PYTHONPATH": str(src),
        "CRAG_CACHE_DIR": str(cache),
        "CRAG_SEARCH__PROVIDER": "corpus",
        "CRAG_SEARCH__CORPUS_PATH": str(corpus),
        "CRAG_CORRECTION__SEARCH_TIMEOUT": "60",
    }
    cmd = [sys.executable, "-m", "crag.cli", "serve", "--kb", str(kb), "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):  # up to 5 minutes: models load, the corpus is indexed on first use
        if proc.poll() is not None:
            raise SystemExit(f"server from {src} exited; see {log}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server from {src} did not start; see {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)


def chat(url: str, question: str, *, first_only: bool = False) -> dict[str, Any]:
    """One streamed chat request: time to the first content, the text, and the trace id."""
    body = {"model": "crag", "stream": True, "messages": [{"role": "user", "content": question}]}
    t0 = time.perf_counter()
    first: float | None = None
    text, chunks, final = "", 0, {}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        trace_id = r.headers.get("x-trace-id", "")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if not chunk.get("choices"):
                continue
            choice = chunk["choices"][0]
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece:
                chunks += 1
                if first is None:
                    first = time.perf_counter() - t0
                    if first_only:
                        break  # closing the stream stops the model: the baseline costs its first token only
                text += piece
            if choice.get("finish_reason"):
                final = chunk
    return {"first_content_s": first, "text": text, "chunks": chunks, "trace_id": trace_id, "final": final,
            "total_s": time.perf_counter() - t0}  # fmt: skip


def baseline_src(rev: str) -> Path:
    tree = OUT / f"baseline-{rev}"
    if not (tree / "src" / "crag").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True)
    return tree / "src"


def measure(item: dict[str, Any], gated: str, baseline: str | None) -> dict[str, Any]:
    run = chat(gated, item["question"])
    trace = httpx.get(f"{gated}/v1/traces/{run['trace_id']}", timeout=60).json()
    saved = str(trace.get("answer") or "")
    common = _common_prefix(run["text"], saved)
    answers = item.get("answers") or []
    context = [str(c.get("text") or "") for c in trace.get("context") or []]
    rec: dict[str, Any] = {
        "id": item["id"], "lang": item.get("lang"), "answerable": bool(answers) and item.get("answerable", True),
        "streamed_equals_saved": run["text"] == saved,
        "withdrawn_chars": len(run["text"]) - len(common),
        "first_shown_s": run["first_content_s"], "total_s": run["total_s"], "chunks": run["chunks"],
        "model_first_token_s": (trace.get("stream") or {}).get("first_token_s"),
        "trace_first_shown_s": (trace.get("stream") or {}).get("first_shown_s"),
        "action": trace.get("action"), "status": trace.get("status"), "refused": bool(trace.get("refused")),
        "accurate": bool(answers) and gold_match(saved, answers),
        "context_holds_gold": bool(answers) and context_recall(context, answers),
        "cited_gold": cited_gold(saved, trace.get("citations") or [], answers) if answers else None,
        "answer": saved,
    }  # fmt: skip
    if baseline is not None:
        base = chat(baseline, item["question"], first_only=True)
        rec["baseline_first_token_s"] = base["first_content_s"]
        rec["baseline_idle_after_s"] = wait_idle(baseline, base["trace_id"])
    return rec


def wait_idle(url: str, trace_id: str, limit: float = 300.0) -> float:
    """Wait until the server has saved ``trace_id`` (its run is over); seconds waited.

    The engine before the gate kept writing after its reader hung up: its model would still
    be busy when the next question reaches the gated server, and both would share the CPU.
    """
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        try:
            if httpx.get(f"{url}/v1/traces/{trace_id}", timeout=10).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return round(time.perf_counter() - t0, 3)


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def summarise(recs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str, rows: list[dict[str, Any]]) -> float | None:
        v = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return round(statistics.median(v), 3) if v else None

    out: dict[str, Any] = {}
    for lang in [*sorted({str(r["lang"]) for r in recs}), "all"]:
        rows = [r for r in recs if lang == "all" or r["lang"] == lang]
        ans = [r for r in rows if r["answerable"]]
        with_gold = [r for r in ans if r["context_holds_gold"]]
        cited = [r["cited_gold"] for r in ans if r["cited_gold"] is not None]
        gaps = [r["first_shown_s"] - r["baseline_first_token_s"] for r in rows
                if r.get("first_shown_s") is not None and r.get("baseline_first_token_s") is not None]  # fmt: skip
        waits = [r["trace_first_shown_s"] - r["model_first_token_s"] for r in rows
                 if r.get("trace_first_shown_s") is not None and r.get("model_first_token_s") is not None]  # fmt: skip
        out[lang] = {
            "questions": len(rows),
            "withdrawn_chars": sum(r["withdrawn_chars"] for r in rows),
            "streamed_equals_saved": sum(r["streamed_equals_saved"] for r in rows),
            "accuracy": round(sum(r["accurate"] for r in ans) / len(ans), 3) if ans else None,
            "false_refusal": f"{sum(r['refused'] for r in with_gold)} of {len(with_gold)}",
            "citation_precision": round(sum(cited) / len(cited), 3) if cited else None,
            "citation_precision_n": len(cited),
            "first_shown_s_p50": med("first_shown_s", rows),
            "baseline_first_token_s_p50": med("baseline_first_token_s", rows),
            "gated_minus_baseline_s_p50": round(statistics.median(gaps), 3) if gaps else None,
            "model_first_token_s_p50": med("model_first_token_s", rows),
            "gate_wait_after_model_first_token_s_p50": round(statistics.median(waits), 3) if waits else None,
            "total_s_p50": med("total_s", rows),
        }
    return out


def run_all(todo: list[dict[str, Any]], args: argparse.Namespace, results: Path) -> None:
    """Start both servers, ask every question of ``todo`` in turn, append each record to ``results``."""
    servers = []
    try:
        # Each server embeds with its own cache, empty at the start: with one shared cache the
        # baseline, asked second, found the query and strip vectors the gated server had just
        # computed, and skipped ~0.4 s (p50) a real request pays (the KB's vectors are in its store).
        gated_proc, gated = start_server(
            ROOT / "src", args.kb, args.search_corpus, args.out / "gated.log", args.out / "cache-gated"
        )
        servers.append(gated_proc)
        baseline = None
        if args.baseline_rev:
            kb_copy = args.out / "kb-baseline"  # its own copy: the old engine writes its traces there
            if not kb_copy.exists():
                shutil.copytree(args.kb, kb_copy)
            base_proc, baseline = start_server(
                baseline_src(args.baseline_rev),
                kb_copy,
                args.search_corpus,
                args.out / "baseline.log",
                args.out / "cache-baseline",
            )
            servers.append(base_proc)
        # A question the KB cannot answer, so the search runs: the engine before 58c71a4 indexed
        # the corpus inside its first search request, and that question's time would count it.
        for url in [gated] + ([baseline] if baseline else []):
            chat(url, "Which team won the 1930 FIFA World Cup final in Montevideo?")
        with results.open("a", encoding="utf-8") as sink:
            for n, item in enumerate(todo, 1):
                rec = measure(item, gated, baseline)
                sink.write(json.dumps(rec, ensure_ascii=False) + "\n")
                sink.flush()
                print(f"[{n}/{len(todo)}] {item['id']} first shown {rec['first_shown_s']}s "
                      f"(baseline {rec.get('baseline_first_token_s')}) equal={rec['streamed_equals_saved']} "
                      f"accurate={rec['accurate']}", flush=True)  # fmt: skip
    finally:
        for proc in servers:
            stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kb", type=Path, required=True, help="a KB built with crag ingest data/hard/internal")
    ap.add_argument("--search-corpus", type=Path, default=ROOT / "data" / "hard" / "external")
    ap.add_argument("--dataset", type=Path, default=ROOT / "data" / "hard" / "questions.jsonl")
    ap.add_argument("--baseline-rev", default="b42910b", help="git revision of today's engine ('' to skip)")
    ap.add_argument("--lang", choices=("en", "zh"))
    ap.add_argument("--limit", type=int)
    ap.add_argument("--per-lang", type=int, help="the first N questions of each language (a sample of both)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summary-only", action="store_true", help="summarise the results so far; ask nothing")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    items = [json.loads(line) for line in args.dataset.read_text("utf-8").splitlines() if line.strip()]
    items = [it for it in items if not args.lang or it.get("lang") == args.lang][: args.limit]
    if args.per_lang:
        by_lang = {lang: [it for it in items if it.get("lang") == lang] for lang in ("en", "zh")}
        items = by_lang["en"][: args.per_lang] + by_lang["zh"][: args.per_lang]
    results = args.out / "results.jsonl"
    done = {json.loads(line)["id"] for line in results.read_text("utf-8").splitlines()} if results.exists() else set()
    todo = [] if args.summary_only else [it for it in items if it["id"] not in done]
    if todo:
        run_all(todo, args, results)
    recs = [json.loads(line) for line in results.read_text("utf-8").splitlines() if line.strip()]
    by_id = {it["id"]: it for it in items}
    for r in recs:  # the dataset's own "answerable" (unanswerable questions carry answers too)
        if r["id"] in by_id:
            r["answerable"] = bool(by_id[r["id"]].get("answers")) and by_id[r["id"]].get("answerable", True)
    summary = summarise([r for r in recs if r["id"] in by_id])
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), "utf-8")
    print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
