"""``run_crag_context``: CRAG up to generation, for retrievers (control flow with fakes).

The same steps as ``run_crag`` before it generates: the strips it returns are the ones an
answer would be written from, on every branch, and the model is never asked to answer.
The real components are proven through the adapters (tests/test_integrations.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from crag.config import CragSettings, RetrievalSettings
from crag.grade.heuristic import set_confidence
from crag.kb import KnowledgeBase
from crag.pipeline import CorrectedContext, Deps, run_crag, run_crag_context
from crag.testing.fakes import HashEmbedder, JudgingLLM, ScriptedLLM, StaticWebSearch
from crag.trace.spans import Tracer
from crag.trace.store import TraceStore, trace_status
from crag.types import Action, Evaluation, Grade, Passage, Query, WebResult

pytestmark = pytest.mark.unit

WEB = [WebResult("Zebra facts", "https://example.org/zebra", "The web gold says zebras sleep standing up.")]


class KeywordEvaluator:
    """Grades by marker words so tests choose the branch: 'gold' 0.9, 'partial' 0.5."""

    name = "keyword-fake"

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        grades = [
            Grade(p.id, 0.9 if "gold" in p.text else 0.5 if "partial" in p.text else 0.1, "scripted") for p in passages
        ]
        return Evaluation(grades, set_confidence(grades), "scripted", self.name)


@pytest.fixture
def kb(tmp_path: Path) -> KnowledgeBase:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Zebras live in Africa. This gold fact says zebras have stripes.", "utf-8")
    (docs / "b.txt").write_text("Lions are partial to meat. Lions live in prides.", "utf-8")
    (docs / "c.txt").write_text("The stock market closed higher on Friday.", "utf-8")
    base = KnowledgeBase(tmp_path / "kb", HashEmbedder(), retrieval=RetrievalSettings(top_k=1))
    base.ingest([docs])
    return base


def context_and_answer(
    kb: KnowledgeBase, question: str, search_results: Sequence[WebResult], cfg: CragSettings | None = None
) -> tuple[CorrectedContext, dict, ScriptedLLM, list[str]]:
    """The context-only run and, for the same question and components, the answer's context texts."""
    cfg = cfg or CragSettings(retrieval={"top_k": 1})
    llm, search, tracer = ScriptedLLM(["Answer [1]."]), StaticWebSearch(search_results), Tracer()
    got = run_crag_context(question, Deps(kb, KeywordEvaluator(), llm, search), cfg, tracer)
    answer = run_crag(question, Deps(kb, KeywordEvaluator(), ScriptedLLM(["Answer [1]."]), search), cfg, Tracer())
    return got, tracer.to_dict(), llm, [s.text for s in answer.context]


@pytest.mark.parametrize(
    ("question", "action", "origins"),
    [
        ("Do zebras have stripes?", Action.CORRECT, {"internal"}),
        ("Are lions partial to meat?", Action.AMBIGUOUS, {"internal", "web"}),
        ("How did the stock market close on Friday?", Action.INCORRECT, {"web"}),
    ],
)
def test_each_branch_returns_the_strips_an_answer_is_written_from(
    kb: KnowledgeBase, question: str, action: Action, origins: set[str]
) -> None:
    got, trace, llm, answer_context = context_and_answer(kb, question, WEB)
    assert got.action is action and got.decision.confidence == got.confidence is not None
    assert {s.origin for s in got.strips} == origins
    assert [s.text for s in got.strips] == answer_context  # what generation would have been shown
    assert all(0.0 <= s.score <= 1.0 for s in got.strips)
    assert all("<source" not in m["content"] for p in llm.prompts for m in p)  # no generation prompt
    assert got.trace_id == trace["id"] and got.query.text == question
    assert bool(got.queries) == (action is not Action.CORRECT)  # searched on Ambiguous and Incorrect only
    assert "generate" not in trace["timings"] and "answer" not in trace
    assert trace["context"] == [
        {"text": s.text, "source": s.source, "origin": s.origin, "title": s.title} for s in got.strips
    ]
    assert trace["action"] == action.value and trace_status(trace) == "retrieved"


def test_an_unverified_correct_searches_as_the_answer_path_would(kb: KnowledgeBase) -> None:
    cfg = CragSettings(retrieval={"top_k": 1})
    cfg.correction.verify_threshold = 0.7  # the fake model has no calibrated threshold
    llm, search, tracer = JudgingLLM(["unused"], yes=[0.2]), StaticWebSearch(WEB), Tracer()
    got = run_crag_context("Do zebras have stripes?", Deps(kb, KeywordEvaluator(), llm, search), cfg, tracer)
    assert len(llm.scored) == 1 and llm.prompts == [] and len(search.queries) == 1
    assert got.action is Action.AMBIGUOUS and {s.origin for s in got.strips} == {"internal", "web"}
    assert tracer.to_dict()["escalated"]["rejected"] == "not verified"
    assert got.usage.calls == 1  # the verification, counted as an answer counts it


def test_a_saved_context_trace_lists_as_retrieved(kb: KnowledgeBase, tmp_path: Path) -> None:
    got, trace, _, _ = context_and_answer(kb, "Do zebras have stripes?", WEB)
    store = TraceStore(tmp_path / "traces.sqlite")
    store.save(trace)
    row = store.list(status="retrieved")[0]
    assert (row["id"], row["status"], row["action"]) == (got.trace_id, "retrieved", "correct")
    assert row["answer"] is None
    # An error still reads as a failure, whatever the run was for.
    assert trace_status(trace | {"errors": ["retrieve: store down"]}) == "failed"
