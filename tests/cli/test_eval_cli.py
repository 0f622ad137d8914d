"""`crag eval` end to end: real embedder, real store, the bundled 0.5B model (4 answers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_fixtures import project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def crag(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CRAG_LLM__MODEL": "qwen2.5-coder-0.5b",
        "CRAG_EVALUATOR__BACKEND": "heuristic",
        "CRAG_CACHE_DIR": str(project_cache_dir()),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "crag.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("eval")
    docs = root / "docs"
    docs.mkdir()
    (docs / "warsaw.md").write_text("# Warsaw\n\nThe Royal University of Warsaw was established in 1816.", "utf-8")
    (docs / "tianjin.txt").write_text("天津犹太会堂于1937年开始筹建，1940年建成。", "utf-8")
    kb = root / "kb"
    proc = crag("ingest", str(docs), "--kb", str(kb))
    assert proc.returncode == 0, proc.stderr
    dataset = root / "qa.jsonl"
    rows = [
        {"id": "warsaw", "question": "When was the Royal University of Warsaw established?", "answers": ["1816"]},
        {"id": "tianjin", "question": "天津犹太会堂是哪一年建成的？", "answers": ["1940年", "1940"], "lang": "zh"},
    ]
    dataset.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return kb, dataset


def test_eval_with_real_model_then_resume(setup: tuple[Path, Path], tmp_path: Path) -> None:
    kb, dataset = setup
    out = tmp_path / "eval-out"
    args = ("eval", "--dataset", str(dataset), "--kb", str(kb), "--search", "none", "--output", str(out))
    proc = crag(*args)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    assert "CRAG − RAG accuracy" in proc.stdout
    lines = (out / "results.jsonl").read_text("utf-8").splitlines()
    recs = [json.loads(x) for x in lines]
    assert sorted((r["id"], r["mode"]) for r in recs) == [
        ("tianjin", "crag"),
        ("tianjin", "rag"),
        ("warsaw", "crag"),
        ("warsaw", "rag"),
    ]
    assert all(r["error"] is None and r["llm_calls"] >= 1 and r["latency"] > 0 for r in recs)
    assert sum(r["metrics"]["accuracy"] for r in recs) >= 2  # the facts are in the KB; the model copies them
    md = (out / "report.md").read_text("utf-8")
    assert "## Overall" in md and "## CRAG − RAG: paired tests" in md and "PARTIAL" not in md
    assert "data:image/png;base64," in (out / "report.html").read_text("utf-8")

    # Same command again: nothing left to answer, same results, a fresh report.
    again = crag(*args)
    assert again.returncode == 0, again.stderr
    assert (out / "results.jsonl").read_text("utf-8").splitlines() == lines

    # Then with the judge: the answers are reused, only the blind verdicts are added.
    judged = crag(*args, "--judge", "llm")
    assert judged.returncode == 0, judged.stderr
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text("utf-8").splitlines()]
    verdicts = [r for r in recs if r.get("kind") == "judge"]
    assert [r for r in recs if r.get("kind") != "judge"] == [json.loads(x) for x in lines]
    assert len(verdicts) == 2 and all(v["error"] is None for v in verdicts)
    assert all(1 <= x <= 5 for v in verdicts for s in v["scores"].values() for x in s.values())
    meta = json.loads((out / "run.json").read_text("utf-8"))
    assert meta["judge"] == "qwen2.5-coder-0.5b (logprob)"
    assert "judge accuracy" in (out / "report.md").read_text("utf-8")


def test_bad_dataset_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x", "answers": ["a"]}\n{"question": "y"}\n', "utf-8")
    proc = crag("eval", "--dataset", str(bad), "--output", str(tmp_path / "o"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    text = " ".join(proc.stderr.split())
    assert text.startswith("error:") and "bad.jsonl:2" in text and 'missing "answers"' in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge", "gpt"], "unknown --judge 'gpt'"),
        (["--judge", "llm", "--judge-mode", "vote"], "unknown --judge-mode"),
    ],
)
def test_bad_judge_options_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "x?", "answers": ["a"]}\n', "utf-8")
    proc = crag("eval", "--dataset", str(data), "--output", str(tmp_path / "o"), *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert message in " ".join(proc.stderr.split())
