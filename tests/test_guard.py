"""One GuardedLLM per request: every LLM call, LLM grading included, counts against the
request's token budget and stops at its deadline.

The count is proven with the real bundled model (its own token counts, charged to the
per-day budget file); the deadline's control flow with a fake model that never answers.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from crag.budget import Budget
from crag.config import CragSettings, RetrievalSettings
from crag.deadline import Deadline
from crag.errors import LLMBudgetExceeded, LLMError
from crag.grade.heuristic import HeuristicEvaluator
from crag.grade.llm_judge import LLMJudgeEvaluator
from crag.kb import KnowledgeBase
from crag.llm.guard import GuardedLLM
from crag.pipeline import Deps, run_crag
from crag.pipeline.guard import guard
from crag.protocols import LLM, ScoringLLM, YesNoLLM, offers
from crag.testing.fakes import HashEmbedder, JudgingLLM, ScriptedLLM
from crag.trace.spans import Tracer
from crag.types import Passage, Query

MESSAGES = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]
PASSAGES = [Passage("a", "The Lumen Bridge in Varda was opened in 1987."), Passage("b", "Bananas are yellow.")]


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bridge.txt").write_text(
        "The Lumen Bridge in Varda was opened in 1987. It is 412 metres long and crosses the Orra river.", "utf-8"
    )
    (docs / "zh.txt").write_text("卢门桥位于瓦尔达，于1987年通车。桥长412米。", "utf-8")
    (docs / "fruit.txt").write_text("Bananas are a good source of potassium. They grow in the tropics.", "utf-8")
    base = KnowledgeBase(tmp_path / "kb", HashEmbedder(), retrieval=RetrievalSettings(top_k=2))
    base.ingest([docs])
    return base


class Stuck(ScriptedLLM):
    """A model that does not answer until released (a hung server), counting the calls it got."""

    model_id = "stuck"

    def __init__(self) -> None:
        super().__init__(['{"score": 0.9, "reason": "answers it"}'])
        self.release = threading.Event()
        self.started = 0

    def complete(self, messages: Sequence[dict[str, str]], **options: Any) -> Any:
        self.started += 1
        self.release.wait(30)
        return super().complete(messages, **options)


# -- control flow (fakes) --------------------------------------------------------------------
@pytest.mark.unit
def test_llm_grading_stops_at_the_request_deadline(kb: KnowledgeBase) -> None:
    stuck = Stuck()
    judge = LLMJudgeEvaluator(stuck, HeuristicEvaluator(), mode="per-doc")
    try:
        guarded = guard(kb, stuck, None, judge, CragSettings(), Deadline(0.2))
        ev = guarded.evaluator.grade(Query.of("When was the Lumen Bridge opened?"), PASSAGES)
    finally:
        stuck.release.set()
    assert guarded.evaluator is not judge and judge.calls == 0  # the request's copy asked, through the guard
    assert "llm judge failed" in ev.degraded and "timed out" in ev.degraded
    assert ev.degraded.endswith("used heuristic") and len(ev.grades) == 2  # graded anyway, by the fallback
    assert stuck.started == 1  # gave up at the deadline instead of asking for the next passage


@pytest.mark.unit
def test_llm_grading_is_refused_once_the_request_budget_is_spent(kb: KnowledgeBase) -> None:
    llm = ScriptedLLM(['{"score": 0.9, "reason": "answers it"}', "The bridge opened in 1987 [1]."])
    judge = LLMJudgeEvaluator(llm, HeuristicEvaluator(), mode="per-doc")
    cfg = CragSettings(retrieval={"top_k": 2}, correction={"per_request_llm_tokens": 5})
    tracer = Tracer()
    with pytest.raises(LLMBudgetExceeded):  # the answer needs tokens too: refused in one line
        run_crag("When was the Lumen Bridge opened?", Deps(kb, judge, llm, None), cfg, tracer)
    notes = tracer.to_dict()["degradations"]
    assert any("llm judge failed" in n and "token budget exceeded" in n for n in notes), notes
    assert llm.prompts == []  # the model was never asked: grading and generation both refused by the guard


@pytest.mark.unit
def test_the_guard_offers_what_its_model_offers() -> None:
    plain = GuardedLLM(ScriptedLLM(["x"]))
    yes_no = GuardedLLM(JudgingLLM(["x"], yes=[0.8]), budget=Budget(None, per_request_tokens=100))
    assert not offers(plain, YesNoLLM) and offers(yes_no, YesNoLLM) and not offers(yes_no, ScoringLLM)
    assert offers(ScriptedLLM(["x"]), LLM) and not offers(ScriptedLLM(["x"]), YesNoLLM)
    with pytest.raises(LLMError, match="gives no token probabilities"):
        plain.yes_probability(MESSAGES)
    assert yes_no.yes_probability(MESSAGES) == 0.8
    assert yes_no.usage.calls == 1 and yes_no.budget.used["tokens"] == yes_no.usage.total_tokens > 1


# -- the real bundled model ------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.slow
def test_llm_judge_tokens_of_the_real_model_are_charged_to_the_request(kb: KnowledgeBase) -> None:
    from llm_fixtures import default_llm

    model = default_llm()  # the bundled 1.5B: P(yes) from its logits, token counts from llama.cpp
    judge = LLMJudgeEvaluator(model, HeuristicEvaluator(), mode="logprob")
    cfg = CragSettings(
        retrieval={"top_k": 1}, correction={"per_day_llm_tokens": 10**9}, llm={"max_tokens": 48}
    )  # one passage and its strip to grade, a short answer: a few seconds on 2 cores
    tracer = Tracer()
    answer = run_crag("When was the Lumen Bridge in Varda opened?", Deps(kb, judge, model, None), cfg, tracer)
    generate = next(s for s in tracer.to_dict()["spans"] if s["name"] == "generate")
    graded = answer.usage.calls - generate["tags"]["llm_calls"]
    # The retrieved passage and the refined strip were graded by the model, each call counted...
    assert graded >= 2, answer.usage
    # ...and every token of the request, grading included, was charged to the budget.
    assert Budget(kb.path / "budget.sqlite", per_day_tokens=10**9).used_today("tokens") == answer.usage.total_tokens
    assert answer.usage.total_tokens > generate["tags"]["prompt_tokens"] + generate["tags"]["completion_tokens"]
    assert judge.calls == 0  # the engine's judge was bound to the request's guarded model, not asked itself
