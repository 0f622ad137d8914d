"""Context budget, LLM compression with fallback, and per-request / per-day cost budgets."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from crag.budget import Budget, BudgetedSearch
from crag.correct.compress import compress
from crag.correct.fit import fit_budget
from crag.errors import BackendError, BudgetExceeded, LLMBudgetExceeded, LLMError, SearchBudgetExceeded, SearchError
from crag.llm.guard import GuardedLLM
from crag.testing.fakes import ScriptedLLM, StaticWebSearch
from crag.text import approx_tokens
from crag.types import Query, Strip, WebResult

pytestmark = pytest.mark.unit

STRIPS = [
    Strip("Paris is the capital of France. It has many museums.", "a.txt", "internal", score=0.9),
    Strip("Paris is the capital city of France. It has many museums!", "b.txt", "internal", score=0.85),
    Strip("The Seine flows through Paris.", "https://c.org", "web", url="https://c.org", score=0.6),
]


def test_fit_budget_by_score_and_diversity() -> None:
    scores = [s.score for s in STRIPS]
    need = approx_tokens(STRIPS[0].text) + approx_tokens(STRIPS[2].text)
    assert fit_budget(STRIPS, scores, need, diversity=True) == [STRIPS[0], STRIPS[2]]
    assert fit_budget(STRIPS, scores, need, diversity=False)[0] is STRIPS[0]
    assert fit_budget(STRIPS, scores, 1) == [STRIPS[0]]  # the best strip is always kept
    assert fit_budget([], [], 10) == []
    with pytest.raises(ValueError):
        fit_budget(STRIPS, [1.0], 10)


def test_compress_keeps_copied_sentences_and_provenance() -> None:
    llm = ScriptedLLM(['{"passages": ["Paris is the capital of France.", "", "The Seine flows through Paris."]}'])
    out, degradations = compress(Query.of("What is the capital of France?"), STRIPS, llm, max_tokens=50)
    assert degradations == []
    assert [s.text for s in out] == ["Paris is the capital of France.", "The Seine flows through Paris."]
    assert out[1].url == "https://c.org" and out[0].score == 0.9
    assert "What is the capital of France?" in llm.prompts[0][0]["content"]
    zh = ScriptedLLM(['{"passages": ["巴黎是法国首都。"]}'])
    compress(Query.of("法国首都是哪里？"), [Strip("巴黎是法国首都。巴黎有很多博物馆。", "z", "internal")], zh, 50)
    assert "逐字摘抄" in zh.prompts[0][0]["content"]


class Broken:
    model_id = "broken"

    def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        raise LLMError("llm down", backend_id="broken", step="compress")


@pytest.mark.parametrize(
    "llm",
    [
        ScriptedLLM(["not json"]),
        ScriptedLLM(['{"passages": ["only one"]}']),  # wrong count
        ScriptedLLM(['{"passages": ["Paris is in Germany and has 9 moons.", "", ""]}']),  # invented
        ScriptedLLM(['{"passages": ["", "", ""]}']),  # kept nothing
        Broken(),
    ],
)
def test_compress_falls_back_to_uncompressed_on_any_failure(llm: object) -> None:
    out, degradations = compress(Query.of("capital?"), STRIPS, llm, max_tokens=50)  # type: ignore[arg-type]
    assert out == STRIPS
    assert "LLM compression failed" in degradations[0]


def test_error_classes_fit_the_tree() -> None:
    assert issubclass(BudgetExceeded, BackendError)
    assert issubclass(SearchBudgetExceeded, SearchError) and issubclass(LLMBudgetExceeded, LLMError)


def test_per_request_limits(tmp_path: Path) -> None:
    b = Budget(tmp_path / "b.sqlite", per_request_tokens=100, per_request_searches=2)
    b.charge_tokens(60)
    with pytest.raises(LLMBudgetExceeded, match="60 of 100"):
        b.charge_tokens(50)
    b.charge_tokens(40)
    b.charge_search()
    b.charge_search()
    with pytest.raises(SearchBudgetExceeded):
        b.charge_search()
    assert b.used == {"tokens": 100, "searches": 2}
    assert not (tmp_path / "b.sqlite").exists()  # no per-day limit: no file


def test_per_day_limits_persist_and_reset_next_day(tmp_path: Path) -> None:
    now = [datetime(2025, 3, 1, 23, 0, tzinfo=timezone.utc)]

    def budget() -> Budget:
        return Budget(tmp_path / "b.sqlite", per_day_tokens=100, per_day_searches=1, clock=lambda: now[0])

    first = budget()
    first.charge_tokens(70)
    first.charge_search()
    second = budget()  # a later request, same day
    with pytest.raises(LLMBudgetExceeded, match="70 of 100 LLM tokens per day"):
        second.charge_tokens(31)
    with pytest.raises(SearchBudgetExceeded):
        second.charge_search()
    second.charge_tokens(500, force=True)  # already spent: recorded even past the limit
    assert second.used_today("tokens") == 570
    now[0] += timedelta(hours=2)
    third = budget()
    third.charge_tokens(100)
    third.charge_search()
    assert third.used_today("tokens") == 100
    with pytest.raises(ValueError):
        Budget(None, per_day_tokens=1)


def test_budgeted_wrappers() -> None:
    budget = Budget(None, per_request_searches=1, per_request_tokens=40)
    search = BudgetedSearch(StaticWebSearch([WebResult("t", "https://e.org", "c")]), budget)
    assert len(search.search("q", k=1)) == 1 and search.name == "static"
    with pytest.raises(SearchError):
        search.search("q", k=1)
    llm = GuardedLLM(ScriptedLLM(["ok"]), budget=budget)  # the fake reports 10 + 5 tokens
    assert llm.complete([{"role": "user", "content": "hi"}]).text == "ok"
    assert budget.used["tokens"] == 15
    with pytest.raises(LLMError):
        llm.complete([{"role": "user", "content": "word " * 40}])
