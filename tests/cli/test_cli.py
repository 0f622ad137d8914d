"""The command line as a user meets it: real subprocesses, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crag.testing.net import free_port
from llm_fixtures import project_cache_dir

pytestmark = pytest.mark.integration


def crag(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    base = {
        **os.environ,
        "CRAG_LLM__MODEL": "qwen2.5-coder-0.5b",
        "CRAG_CACHE_DIR": str(project_cache_dir()),
        "COLUMNS": "200",
    }
    base.pop("TAVILY_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "crag.cli", *args],
        env={**base, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    text = " ".join(proc.stderr.split())
    assert text.startswith("error:"), proc.stderr
    for n in needles:
        assert n in text, text


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    docs = root / "docs"
    docs.mkdir()
    (docs / "warsaw.md").write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    (docs / "tianjin.txt").write_text("天津犹太会堂于1937年开始筹建，1940年建成。", "utf-8")
    (docs / "latin1.txt").write_bytes("Café société à Paris, très élégant.".encode("cp1252"))
    (docs / "photo.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a real pdf")
    kb = root / "kb"
    proc = crag("ingest", str(docs), "--kb", str(kb))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = " ".join(proc.stdout.split())
    assert "photo.txt" in out and "broken.pdf" in out  # skipped with their reasons
    assert "knowledge base: 2 files" in out or "knowledge base: 3 files" in out
    return kb


def test_empty_and_whitespace_question(small_kb: Path) -> None:
    for q in ("", "   \n\t "):
        one_line_error(crag("ask", q, "--kb", str(small_kb)), "question is empty")


def test_100kb_question(small_kb: Path) -> None:
    one_line_error(crag("ask", "why " * 25_600, "--kb", str(small_kb)), "characters", "limit")


def test_missing_and_empty_kb(tmp_path: Path) -> None:
    one_line_error(crag("ask", "hello?", "--kb", str(tmp_path / "nope")), "no knowledge base", "crag ingest")
    empty = tmp_path / "empty"
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "blank.txt").write_text("   \n", "utf-8")
    crag("ingest", str(tmp_path / "e"), "--kb", str(empty))
    one_line_error(crag("ask", "hello?", "--kb", str(empty)), "is empty")


def test_unreachable_llm_endpoint(small_kb: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "crag.toml"
    cfg.write_text(
        f'[llm]\nbackend = "openai"\nbase_url = "http://127.0.0.1:{free_port()}/v1"\nretries = 0\ntimeout = 5\n'
        '[search]\nprovider = "none"\n',
        "utf-8",
    )
    proc = crag("ask", "When was the Royal University of Warsaw established?", "--kb", str(small_kb), "-c", str(cfg))
    one_line_error(proc, "127.0.0.1")
    # The failed question still left a trace with the error in it, listed as failed.
    listing = crag("trace", "list", "--kb", str(small_kb), "--status", "failed", "--json")
    assert listing.returncode == 0, listing.stderr
    rows = [json.loads(line) for line in listing.stdout.splitlines()]
    assert rows and rows[0]["question"].startswith("When was the Royal") and {r["status"] for r in rows} == {"failed"}
    for option, value in (("--status", "broken"), ("--action", "wrong"), ("--limit", "0")):
        bad = crag("trace", "list", "--kb", str(small_kb), option, value)
        assert bad.returncode == 2 and option in bad.stderr and "Traceback" not in bad.stderr


def test_missing_api_key(small_kb: Path) -> None:
    proc = crag("ask", "Who won?", "--kb", str(small_kb), "--search", "tavily")
    one_line_error(proc, "TAVILY_API_KEY")


def test_bad_config(tmp_path: Path, small_kb: Path) -> None:
    one_line_error(crag("ask", "q?", "--kb", str(small_kb), "-c", str(tmp_path / "missing.toml")), "not found")
    bad = tmp_path / "bad.toml"
    bad.write_text("[evaluator]\nupper = 0.2\nlower = 0.5\n", "utf-8")
    one_line_error(crag("ask", "q?", "--kb", str(small_kb), "-c", str(bad)), "lower")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[retrieval]\ntop_kk = 3\n", "utf-8")
    one_line_error(crag("ask", "q?", "--kb", str(small_kb), "-c", str(unknown)), "top_kk")


def test_unknown_trace_and_remove(small_kb: Path, tmp_path: Path) -> None:
    one_line_error(crag("trace", "show", "zzzzzzzz", "--kb", str(small_kb)), "no trace")
    proc = crag("remove", str(tmp_path / "never-ingested.txt"), "--kb", str(small_kb))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_ask_json_with_real_llm_and_trace(small_kb: Path) -> None:
    proc = crag(
        "ask",
        "When was the Royal University of Warsaw established?",
        "--kb",
        str(small_kb),
        "--search",
        "none",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"answer", "action", "confidence", "citations", "context", "trace_id", "timings"} <= set(data)
    assert data["action"] == "correct"
    assert "1816" in data["answer"]
    assert data["context"] and all({"text", "source", "origin"} <= set(c) for c in data["context"])
    shown = crag("trace", "show", data["trace_id"], "--kb", str(small_kb), "--json")
    trace = json.loads(shown.stdout)
    assert trace["action"] == "correct" and trace["answer"] == data["answer"]
    assert (
        trace["retrieved"]
        and trace["grades"]
        and trace["context"] == [{**c, "title": c.get("title", "")} for c in trace["context"]]
    )
    listing = crag("trace", "list", "--kb", str(small_kb))
    assert data["trace_id"][:14] in listing.stdout


def test_bad_meta_filter_and_collection_options(small_kb: Path, tmp_path: Path) -> None:
    one_line_error(crag("ingest", str(tmp_path), "--kb", str(small_kb), "--meta", "team"), "--meta 'team'", "KEY=VALUE")
    one_line_error(crag("ask", "q?", "--kb", str(small_kb), "--filter", "a b=c"), "--filter key 'a b'")
    one_line_error(crag("serve", "--kb", "rag=kb2"), "collection name 'rag' is reserved")
    one_line_error(crag("serve", "--kb", "kb1", "--kb", "kb2"), "--kb takes one bare folder")


@pytest.mark.slow
def test_meta_at_ingest_and_filter_at_ask_with_the_real_llm(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "warsaw_1915.md").write_text("The University of Warsaw was re-established in 1915.", "utf-8")
    (docs / "warsaw_1816.md").write_text(
        "---\nyear: 1816\n---\nThe Royal University of Warsaw was established in 1816.", "utf-8"
    )
    kb = tmp_path / "kb"
    added = crag("ingest", str(docs), "--kb", str(kb), "--meta", "year=1915", "--meta", "团队=档案")
    assert added.returncode == 0, added.stderr
    proc = crag(
        "ask", "When was the Royal University of Warsaw established?", "--kb", str(kb),
        "--filter", "year=1816", "--mode", "rag", "--search", "none", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [c["source"] for c in data["context"]] == [str((docs / "warsaw_1816.md").resolve())]
    assert "1816" in data["answer"]
    trace = json.loads(crag("trace", "show", data["trace_id"], "--kb", str(kb), "--json").stdout)
    assert trace["filters"] == {"year": ["1816"]}
    assert trace["retrieved"][0]["metadata"] == {"year": "1816", "团队": "档案"}  # front matter wins a clash


def test_serve_holds_named_collections(tmp_path: Path) -> None:
    """`crag serve --kb NAME=PATH` twice: one process, both collections listed as models."""
    port = free_port()
    env = {"CRAG_API_KEYS": "cli-serve-key-123"}
    args = ["serve", "--kb", f"handbook={tmp_path / 'a'}", "--kb", f"手册={tmp_path / 'b'}", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "crag.cli", *args],
        env={**os.environ, "CRAG_CACHE_DIR": str(project_cache_dir()), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        import httpx

        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, headers={"Authorization": "Bearer cli-serve-key-123"}, timeout=10) as client:
            for _ in range(600):  # the server is up when /healthz answers (at most a minute)
                try:
                    client.get("/healthz")
                    break
                except httpx.TransportError:
                    assert proc.poll() is None, proc.communicate()[1]
                    time.sleep(0.1)
            models = client.get("/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["handbook", "手册"]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
