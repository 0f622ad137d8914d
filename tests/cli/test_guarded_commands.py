"""`crag grade`, `crag calibrate` and `crag eval --judge llm` call the model through a request's guard.

The model is a real OpenAI-compatible HTTP server on 127.0.0.1 (``crag.testing.stubs.StubLLM``);
a slow reply is stopped by ``correction.deadline_seconds``, a prompt over
``correction.per_request_llm_tokens`` is refused before it is sent, and either shows up as a
recorded degradation (the LLM evaluator falls back, the judge records a failure), never a traceback.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag.cli import app
from crag.config import CragSettings
from crag.engine import CRAG
from crag.llm.guard import GENERATION_GRACE
from crag.testing.stubs import StubLLM

pytestmark = pytest.mark.integration

runner = CliRunner()
DEADLINE = 0.4
PAIRS = [
    {"query": "Who wrote Hamlet?", "passage": "Hamlet is a tragedy written by William Shakespeare.", "label": 1},
    {"query": "Who wrote Hamlet?", "passage": "Bananas are rich in potassium.", "label": 0},
    {"query": "中国的首都是哪里？", "passage": "北京是中华人民共和国的首都。", "label": 1},
    {"query": "中国的首都是哪里？", "passage": "光合作用是植物利用光能合成有机物的过程。", "label": 0},
]


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with StubLLM(delay=60) as server:
        yield server


def toml(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {json.dumps(str(v) if isinstance(v, Path) else v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def llm_section(stub: StubLLM) -> dict[str, Any]:
    return {"backend": "openai", "base_url": stub.url, "model": "stub", "timeout": 60, "retries": 0}


def pairs_file(tmp_path: Path, *, labels: bool) -> Path:
    rows = [p if labels else {k: v for k, v in p.items() if k != "label"} for p in PAIRS]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def test_grade_stops_a_slow_llm_evaluator_at_the_deadline_and_falls_back(stub: StubLLM, tmp_path: Path) -> None:
    stub.fault = "slow"  # the model would answer after 60 s
    cfg = toml(
        tmp_path / "crag.toml",
        {"llm": llm_section(stub), "evaluator": {"backend": "llm"}, "correction": {"deadline_seconds": DEADLINE}},
    )
    out = tmp_path / "graded.jsonl"
    start = time.monotonic()
    res = runner.invoke(app, ["grade", "-i", str(pairs_file(tmp_path, labels=False)), "-c", str(cfg), "-o", str(out)])
    seconds = time.monotonic() - start
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    # One guard per question: each stops at the deadline (+ grace), not at the model's 60 s.
    assert seconds < 2 * DEADLINE * (1 + GENERATION_GRACE) + 5.0
    assert len(stub.requests) == 2  # one call per question was made, and abandoned
    rows = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert [r["passage"] for r in rows] == [p["passage"] for p in PAIRS]
    for r in rows:
        assert "timed out" in r["degraded"] and "used heuristic" in r["degraded"]
        assert r["reason"].startswith("heuristic fallback: ")
    assert rows[0]["score"] > rows[1]["score"] and rows[2]["score"] > rows[3]["score"]  # the fallback still ranks
    assert "degraded: 2 of 2 questions" in " ".join(res.output.split())


def test_grade_refuses_a_prompt_over_the_request_budget_before_sending_it(stub: StubLLM, tmp_path: Path) -> None:
    cfg = toml(
        tmp_path / "crag.toml",
        {"llm": llm_section(stub), "evaluator": {"backend": "llm"}, "correction": {"per_request_llm_tokens": 5}},
    )
    res = runner.invoke(app, ["grade", "-i", str(pairs_file(tmp_path, labels=False)), "-c", str(cfg)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert len(rows) == len(PAIRS)
    assert all("LLM token budget exceeded" in r["degraded"] for r in rows)
    assert stub.requests == []  # nothing was sent


def test_grade_within_the_limits_reaches_the_model(stub: StubLLM, tmp_path: Path) -> None:
    cfg = toml(
        tmp_path / "crag.toml",
        {
            "llm": llm_section(stub),
            "evaluator": {"backend": "llm", "llm_mode": "batch"},
            "correction": {"deadline_seconds": 30, "per_request_llm_tokens": 5000},
        },
    )
    res = runner.invoke(app, ["grade", "-i", str(pairs_file(tmp_path, labels=False)), "-c", str(cfg)])
    assert res.exit_code == 0, res.output
    assert len(stub.requests) == 2  # one batch call per question, through the guard
    rows = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    # The stub answers a JSON request with "{}": unreadable, so the fallback grades, and says why.
    assert all(r["degraded"].startswith("llm judge reply unparseable") for r in rows)


def test_calibrate_goes_through_the_guard_too(stub: StubLLM, tmp_path: Path) -> None:
    cfg = toml(
        tmp_path / "crag.toml",
        {"llm": llm_section(stub), "evaluator": {"backend": "llm"}, "correction": {"per_request_llm_tokens": 5}},
    )
    labels = pairs_file(tmp_path, labels=True)
    res = runner.invoke(app, ["calibrate", "--labels", str(labels), "-c", str(cfg), "--plot", str(tmp_path / "r.png")])
    assert res.exit_code == 0, res.output
    assert "degraded: 2 of 2 questions" in " ".join(res.output.split()) and "budget exceeded" in res.output
    assert stub.requests == []


def stub_kb(tmp_path: Path, llm: StubLLM, embedder: StubLLM) -> dict[str, dict[str, Any]]:
    """A knowledge base of one document embedded by ``embedder``; the settings that open it."""
    sections: dict[str, dict[str, Any]] = {
        "kb": {"path": tmp_path / "kb"},
        "llm": llm_section(llm),
        "embedder": {"backend": "openai", "base_url": embedder.url, "model": "stub-embed"},
        "evaluator": {"backend": "heuristic"},
        "search": {"provider": "none"},
    }
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "warsaw.md").write_text("The Royal University of Warsaw was established in 1816.", "utf-8")
    CRAG(CragSettings(**sections)).ingest([docs])
    return sections


def test_evaluator_label_stops_a_slow_judge_and_says_so(stub: StubLLM, tmp_path: Path) -> None:
    with StubLLM() as embedder:
        sections = stub_kb(tmp_path, stub, embedder)
        stub.fault = "slow"
        cfg = toml(tmp_path / "crag.toml", sections | {"correction": {"deadline_seconds": DEADLINE}})
        questions = tmp_path / "questions.jsonl"
        questions.write_text(json.dumps({"question": "When was the university established?"}) + "\n", "utf-8")
        out = tmp_path / "labels.jsonl"
        args = ["evaluator", "label", "--questions", str(questions), "-c", str(cfg), "-o", str(out)]
        res = runner.invoke(app, [*args, "--no-from-traces"])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    assert len(stub.requests) == 1  # the judge's call was made, and abandoned at the deadline
    assert "degraded: 1 of 1 questions" in " ".join(res.output.split()) and "timed out" in res.output
    rows = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert rows and all(r["query"] == "When was the university established?" for r in rows)


@pytest.mark.slow
def test_eval_judge_is_stopped_at_the_judge_configs_deadline(stub: StubLLM, tmp_path: Path) -> None:
    with StubLLM() as engine_llm:  # answers and embeds; the judge is the slow ``stub``
        sections = stub_kb(tmp_path, engine_llm, engine_llm)
        engine_cfg = toml(tmp_path / "engine.toml", sections)
        stub.fault = "slow"
        judge_cfg = toml(
            tmp_path / "judge.toml", {"llm": llm_section(stub), "correction": {"deadline_seconds": DEADLINE}}
        )
        dataset = tmp_path / "qa.jsonl"
        dataset.write_text(
            json.dumps(
                {"id": "w", "question": "When was the Royal University of Warsaw established?", "answers": ["1816"]}
            )
            + "\n",
            "utf-8",
        )
        out = tmp_path / "eval-out"
        args = ["eval", "--dataset", str(dataset), "-c", str(engine_cfg), "--modes", "rag", "--search", "none"]
        start = time.monotonic()
        res = runner.invoke(app, [*args, "--judge", "llm", "--judge-config", str(judge_cfg), "--output", str(out)])
        seconds = time.monotonic() - start
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text("utf-8").splitlines()]
    verdict = next(r for r in recs if r["kind"] == "judge")
    assert verdict["scores"] == {} and verdict["error"].startswith("judge call failed: ")
    assert "timed out" in verdict["error"]
    assert len(stub.requests) == 1 and seconds < 30  # the judge's 60 s reply was not waited for
    assert "## Judge failures (not scored)" in (out / "report.md").read_text("utf-8")
