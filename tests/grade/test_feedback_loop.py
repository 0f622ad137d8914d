"""The feedback loop end to end with every real component (see crag.testing.feedback_loop).

A simulated user asks eight labelled sample questions (zh + en, all three actions) through
the HTTP API of a real app, rates each answer 👍/👎 through ``POST /v1/feedback``, then
``crag feedback export`` and ``crag evaluator train --with-builtin`` run. The retrained
evaluator must grade the exported pairs better than the bundled one, and must not lose
ground on held-out built-in test pairs (CMRC 2018 + SQuAD 2.0) while doing so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crag.testing.feedback_loop import SAMPLE, run_feedback_loop
from llm_fixtures import SMALL_MODEL, project_cache_dir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUESTIONS = [json.loads(line) for line in (SAMPLE / "questions.jsonl").read_text("utf-8").splitlines() if line.strip()]


def test_rated_answers_retrain_the_evaluator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_CACHE_DIR", os.environ.get("CRAG_CACHE_DIR") or str(project_cache_dir()))
    picked = QUESTIONS[:: len(QUESTIONS) // 8][:8]  # every 15th: both languages, every expected action
    figures = run_feedback_loop(
        tmp_path, picked, model=SMALL_MODEL, max_tokens=48, max_sources=2, builtin_limit=100, general_pairs=100
    )

    # The run must give the loop something to learn from, or the comparison below is empty.
    assert figures["ratings"]["up"] >= 1 and figures["ratings"]["down"] >= 1, figures["ratings"]
    assert figures["pairs_by_label"]["0"] >= 1 and figures["pairs_by_label"]["1"] >= 1, figures

    before, after = figures["feedback_pairs"]["bundled"], figures["feedback_pairs"]["retrained"]
    assert after["mean_abs_error"] < before["mean_abs_error"] - 0.05, figures["feedback_pairs"]
    assert after["auroc"] >= before["auroc"], figures["feedback_pairs"]

    general = figures["general_test_pairs"]
    assert general["retrained"]["auroc"] >= general["bundled"]["auroc"] - 0.03, general
