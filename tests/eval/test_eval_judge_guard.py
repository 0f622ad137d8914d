"""The blind judge asks its model through a request's guard: deadline and token budgets.

A real OpenAI-compatible HTTP server on 127.0.0.1 (``crag.testing.stubs.StubLLM``) plays
the judge's model; the guard is the one ``crag eval`` builds from settings (``RequestGuard``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crag.config import CragSettings
from crag.eval.judge import LLMJudge
from crag.llm.guard import GENERATION_GRACE
from crag.llm.openai_chat import OpenAIChatLLM
from crag.pipeline.guard import RequestGuard
from crag.testing.stubs import StubLLM
from crag.types import Query

pytestmark = pytest.mark.integration

ANSWERS = {"rag": ("It was 1816 [1].", ["Founded in 1816."]), "crag": ("1816 [1].", ["Founded in 1816."])}
DEADLINE = 0.4


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with StubLLM(delay=60) as server:
        yield server


def judge_over(stub: StubLLM, tmp_path: Path, **correction: float) -> LLMJudge:
    """The judge ``crag eval --judge llm`` builds: the stub's model behind a ``RequestGuard``."""
    cfg = CragSettings(kb={"path": tmp_path / "kb"}, correction=correction)
    return LLMJudge(OpenAIChatLLM(stub.url, "stub-judge", timeout=60), seed=0, guard=RequestGuard(cfg))


def test_a_slow_judge_is_stopped_at_the_deadline_and_recorded(stub: StubLLM, tmp_path: Path) -> None:
    stub.fault = "slow"  # the model would answer after 60 s
    judge = judge_over(stub, tmp_path, deadline_seconds=DEADLINE)
    start = time.monotonic()
    verdict = judge.judge(Query.of("When was it founded?"), ["1816"], ANSWERS)
    seconds = time.monotonic() - start
    assert verdict.scores == {}
    assert verdict.error is not None and verdict.error.startswith("judge call failed: ")
    assert "timed out" in verdict.error and "deadline_seconds" in verdict.error
    assert seconds < DEADLINE * (1 + GENERATION_GRACE) + 2.0  # the guard's bound, not the model's 60 s
    assert stub.requests  # the call was made, and abandoned


def test_a_prompt_over_the_request_budget_is_refused_before_the_call(stub: StubLLM, tmp_path: Path) -> None:
    judge = judge_over(stub, tmp_path, per_request_llm_tokens=20)  # the prompt alone is ~300 tokens
    verdict = judge.judge(Query.of("When was it founded?"), ["1816"], ANSWERS)
    assert verdict.error is not None and "LLM token budget exceeded" in verdict.error
    assert "per request" in verdict.error
    assert stub.requests == []  # refused before anything was sent


def test_each_question_has_its_own_request_budget_and_shares_the_day(stub: StubLLM, tmp_path: Path) -> None:
    question = Query.of("When was it founded?")
    judge = judge_over(stub, tmp_path, per_request_llm_tokens=2000, per_day_llm_tokens=10**6)
    first = judge.judge(question, ["1816"], ANSWERS)
    # The healthy stub answers "{}": read as a failure, but the call was made and charged.
    assert first.error == "judge reply lacks scores for answer 1" and len(stub.requests) == 1
    assert (tmp_path / "kb" / "budget.sqlite").is_file()  # the day's total beside the knowledge base
    cfg = CragSettings(kb={"path": tmp_path / "kb"}, correction={"per_day_llm_tokens": 1})
    spent = RequestGuard(cfg)(OpenAIChatLLM(stub.url, "stub-judge")).budget.used_today("tokens")
    assert 100 < spent <= 2000  # one question's prompt, charged to the day

    # A day that holds one more question: each question still gets its own per-request budget.
    judge = judge_over(stub, tmp_path, per_request_llm_tokens=2000, per_day_llm_tokens=2 * spent + 1)
    second = judge.judge(question, ["1816"], ANSWERS)
    assert second.error == first.error and len(stub.requests) == 2
    third = judge.judge(question, ["1816"], ANSWERS)
    assert third.error is not None and "LLM token budget exceeded" in third.error and "per day" in third.error
    assert len(stub.requests) == 2  # refused before anything was sent
