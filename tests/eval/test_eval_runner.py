"""The eval runner's control flow with a real CRAG engine and fake LLM/embedder.

Resumability, per-question failures, refusing a foreign output folder, and the report
files. The real model is exercised in test_eval_cli.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from crag.engine import CRAG
from crag.errors import InputError, LLMError
from crag.eval.datasets import EvalItem
from crag.eval.judge import CRITERIA, LLMJudge
from crag.eval.report import write_report
from crag.eval.run import EvalRun
from crag.eval.runner import EvalOptions, load_results, run_eval
from crag.protocols import Completion
from crag.testing.fakes import HashEmbedder, ScriptedLLM

pytestmark = pytest.mark.unit

ITEMS = [
    EvalItem(
        "w",
        "When was the Royal University of Warsaw established?",
        ["1816"],
        "en",
        "factoid",
        {"expected_action": "correct"},
    ),
    EvalItem("z", "Where do zebras live?", ["Africa"], "en", "factoid", {"expected_action": "correct"}),
    EvalItem("t", "天津犹太会堂是什么时候建成的？", ["1940年"], "zh", "factoid", {"expected_action": "correct"}),
]


class FlakyLLM(ScriptedLLM):
    """Replies like ScriptedLLM; fails (or interrupts) on chosen call numbers (1-based)."""

    def __init__(self, replies: Sequence[str], *, interrupt_at: int = 0, fail_at: Sequence[int] = ()) -> None:
        super().__init__(replies)
        self.interrupt_at, self.fail_at = interrupt_at, set(fail_at)

    def complete(self, messages: Sequence[dict[str, str]], **kw: Any) -> Completion:
        n = len(self.prompts) + 1
        if n == self.interrupt_at:
            self.prompts.append(messages)
            raise KeyboardInterrupt
        if n in self.fail_at:
            self.prompts.append(messages)
            raise LLMError("scripted failure", backend_id="fake", step="complete")
        return super().complete(messages, **kw)


@pytest.fixture
def kb_path(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "warsaw.md").write_text("The Royal University of Warsaw was established in 1816.", "utf-8")
    (docs / "zebra.txt").write_text("Zebras live in Africa and have black and white stripes.", "utf-8")
    (docs / "tianjin.txt").write_text("天津犹太会堂于1937年开始筹建，1940年建成。", "utf-8")
    kb = tmp_path / "kb"
    engine(kb, ScriptedLLM(["unused"])).ingest([docs])
    return kb


def engine(kb: Path, llm: ScriptedLLM) -> CRAG:
    rag = CRAG.from_config(
        kb={"path": str(kb)}, search={"provider": "none"}, trace={"enabled": False}, evaluator={"backend": "heuristic"}
    )
    rag._embedder = HashEmbedder()  # control flow only: no model downloads or loads
    rag._llm = llm
    return rag


def test_interrupted_run_resumes_without_redoing_pairs(kb_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = FlakyLLM(["It was 1816 [1]."], interrupt_at=4)
    with pytest.raises(KeyboardInterrupt):
        run_eval(engine(kb_path, first), ITEMS, out, EvalOptions())
    records, _ = load_results(out / "results.jsonl")
    assert sorted(records) == [("w", "crag"), ("w", "rag"), ("z", "rag")]  # the 4th pair was in flight
    assert not (out / "report.md").exists()  # nothing presented as a finished report
    assert json.loads((out / "status.json").read_text())["complete"] is False

    # A kill mid-write leaves half a line: it is ignored and its pair runs again.
    with (out / "results.jsonl").open("a") as f:
        f.write('{"kind": "answer", "id": "z", "mo')
    second = ScriptedLLM(["It was 1816 [1]."])
    run = run_eval(engine(kb_path, second), ITEMS, out, EvalOptions())
    assert len(second.prompts) == 3  # only (z, crag), (t, rag), (t, crag)
    assert run.complete and len(run.records) == 6
    rec = run.records[("w", "crag")]
    assert rec["metrics"]["accuracy"] == 1.0 and rec["llm_calls"] == 1 and rec["action"] in ("correct", "ambiguous")
    assert rec["cited_gold"] == 1.0  # "It was 1816 [1]." cites the passage that says 1816
    assert run.records[("t", "rag")]["metrics"]["accuracy"] == 0.0
    assert json.loads((out / "status.json").read_text())["complete"] is True
    lines = (out / "results.jsonl").read_text("utf-8").splitlines()
    assert all(json.loads(x) for x in lines[:3] + lines[4:])  # only the cut line is bad

    # Everything done: a third run asks nothing.
    third = ScriptedLLM(["x"])
    run_eval(engine(kb_path, third), ITEMS, out, EvalOptions())
    assert third.prompts == []


def test_failed_pair_is_recorded_marked_partial_and_retried(kb_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = run_eval(
        engine(kb_path, FlakyLLM(["1816 [1]."], fail_at=[2])), ITEMS, out, EvalOptions(modes=("rag", "crag"))
    )
    assert run.failed == [("w", "crag")]
    assert "scripted failure" in run.records[("w", "crag")]["error"]
    md = write_report(run, out)[-1].read_text("utf-8")
    assert "**PARTIAL RUN**: 1 of 6" in md and "## Unanswered pairs" in md
    retry = ScriptedLLM(["1816 [1]."])
    again = run_eval(engine(kb_path, retry), ITEMS, out, EvalOptions())
    assert len(retry.prompts) == 1 and again.complete
    assert not (out / "report.md").exists()  # a new run removes the old report until it finishes


def test_foreign_output_folder_is_refused(kb_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_eval(engine(kb_path, ScriptedLLM(["a"])), ITEMS[:1], out, EvalOptions(modes=("rag",)))
    other = [EvalItem("w", "Another question?", ["x"], "en")]
    with pytest.raises(InputError, match="holds results of another run"):
        run_eval(engine(kb_path, ScriptedLLM(["a"])), other, out, EvalOptions(modes=("rag",)))
    with pytest.raises(InputError, match="unknown mode"):
        EvalOptions(modes=("rag", "self-rag"))


def test_judge_is_blind_and_report_has_every_section(kb_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    reply = json.dumps({"answer_1": dict.fromkeys(CRITERIA, 4), "answer_2": dict.fromkeys(CRITERIA, 2)})
    judge_llm = ScriptedLLM([reply, "not json at all", reply])
    run = run_eval(
        engine(kb_path, ScriptedLLM(["1816 [1]."])), ITEMS, out, EvalOptions(), judge=LLMJudge(judge_llm, seed=5)
    )
    prompts = " ".join(m["content"] for p in judge_llm.prompts for m in p)
    assert "crag" not in prompts.lower().replace("crag-", "") and " rag" not in prompts.lower()
    assert run.judgements["z"]["error"] == "judge reply has no JSON object"
    w = run.judgements["w"]
    assert w["scores"][w["order"][0]]["accuracy"] == 4 and w["scores"][w["order"][1]]["accuracy"] == 2

    paths = write_report(run, out)
    md, html = paths[-1].read_text("utf-8"), paths[-2].read_text("utf-8")
    for section in (
        "## Overall",
        "## By language",
        "## By question type",
        "## By expected action",
        "## CRAG − RAG: paired tests",
        "## CRAG action vs expected action",
        "## Figures",
        "## Judge failures (not scored)",
        "judge faithfulness",
    ):
        assert section in md, section
    assert "PARTIAL" not in md
    assert html.count("data:image/png;base64,") == 5 and "<table>" in html and 'src="plots/' not in html
    assert {p.name for p in (out / "plots").iterdir()} == {
        "metrics.png",
        "actions.png",
        "latency.png",
        "confidence.png",
        "judge.png",
    }
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["complete"] and summary["judge_failures"] == 1
    assert {t["metric"] for t in summary["paired"]} >= {"accuracy", "f1", "judge_accuracy", "latency"}
    # Judged on 2 of 3 questions: the failed verdict is not scored as a number.
    judge_acc = next(t for t in summary["paired"] if t["metric"] == "judge_accuracy")
    assert judge_acc["n"] == 2
    # Both modes gave the same answer; the scripted judge scored slot 1 high and slot 2 low
    # whatever the answer, so it cannot tell right from wrong: AUROC 0.5.
    assert summary["judge_agreement_auroc"] == 0.5 and "How far to trust the judge" in md


def test_report_from_records_only(tmp_path: Path) -> None:
    items = [EvalItem(str(i), f"q{i}?", ["a"], "en" if i % 2 else "zh") for i in range(4)]

    def rec(i: int, mode: str, acc: float) -> dict[str, Any]:
        m = {
            "accuracy": acc,
            "exact_match": 0.0,
            "f1": acc,
            "context_recall": 1.0,
            "context_tokens": 100,
            "success": 1.0,
        }
        return {
            "kind": "answer",
            "id": str(i),
            "mode": mode,
            "answer": "a",
            "action": "rag" if mode == "rag" else "incorrect",
            "confidence": 0.2,
            "latency": 1.0 + i,
            "llm_calls": 1,
            "searches": 0,
            "cited_gold": None if i == 3 else float(i != 2),
            "metrics": m,
            "error": None,
        }

    records = {(str(i), m): rec(i, m, float(m == "crag" or i == 0)) for i in range(4) for m in ("rag", "crag")}
    run = EvalRun(items, ("rag", "crag"), records)
    md = write_report(run, tmp_path)[-1].read_text("utf-8")
    assert "| accuracy (gold in answer) | 4 | 0.250 | 1.000 | +0.750 |" in md
    assert "| 0.667 (2/3) |" in md  # citation precision: two of the three checkable answers cite the gold
