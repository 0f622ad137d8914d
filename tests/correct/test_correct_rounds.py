"""Multi-round correction control flow with fake evaluate/search callables."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from crag.correct.rounds import ABSTAIN_TEXT, abstain_text, correct_until_confident
from crag.deadline import Deadline
from crag.errors import LLMReplyError, SearchError
from crag.types import Query, Strip

pytestmark = pytest.mark.unit

Q = Query.of("When was the Eiffel Tower completed?")


def evaluate(question: Query, strips: Sequence[Strip]) -> list[float]:
    return [0.9 if "1889" in s.text else 0.5 if "Eiffel" in s.text else 0.1 for s in strips]


class Searcher:
    """Returns the scripted strips of each round in turn; records the queries."""

    def __init__(self, *rounds: list[Strip]) -> None:
        self.rounds = list(rounds)
        self.queries: list[list[str]] = []

    def __call__(self, queries: Sequence[str]) -> list[Strip]:
        self.queries.append(list(queries))
        return self.rounds.pop(0) if self.rounds else []


def s(text: str) -> Strip:
    return Strip(text, "https://e.org", "web")


def test_confident_initial_docs_need_no_search() -> None:
    search = Searcher()
    r = correct_until_confident(Q, [s("Completed in 1889.")], evaluate, search, upper=0.6, lower=0.35, max_rounds=3)
    assert (r.rounds, r.searches, r.confident, r.abstain, r.stopped) == (0, 0, True, False, "confident")
    assert search.queries == []


def test_second_round_reaches_confidence_with_gap_queries() -> None:
    search = Searcher([s("The Eiffel Tower is in Paris.")], [s("The Eiffel Tower was completed in 1889.")])
    r = correct_until_confident(Q, [s("Paris has museums.")], evaluate, search, upper=0.6, lower=0.35, max_rounds=3)
    assert r.rounds == 2 and r.confident and not r.abstain and r.stopped == "confident"
    assert r.history == [0.1, 0.5, 0.9] and r.strips[0].text.endswith("1889.") and r.scores[0] == 0.9
    assert r.searches == sum(len(q) for q in search.queries)
    flat = [q for qs in search.queries for q in qs]
    assert len(flat) == len(set(flat))  # never the same query twice


def test_cap_reached_still_low_abstains() -> None:
    search = Searcher([s("Nothing useful.")], [s("Still nothing.")])
    r = correct_until_confident(Q, [], evaluate, search, upper=0.6, lower=0.35, max_rounds=2)
    assert r.rounds == 2 and r.abstain and not r.confident and r.stopped == "max_rounds"
    assert abstain_text("zh") == ABSTAIN_TEXT["zh"] and abstain_text("fr") == ABSTAIN_TEXT["en"]


def test_middling_result_after_cap_is_not_abstention() -> None:
    r = correct_until_confident(
        Q, [], evaluate, Searcher([s("The Eiffel Tower is tall.")]), upper=0.6, lower=0.35, max_rounds=1
    )
    assert r.rounds == 1 and not r.confident and not r.abstain


def test_stops_when_nothing_new_to_ask() -> None:
    search = Searcher()
    r = correct_until_confident(
        Q, [], evaluate, search, upper=0.6, lower=0.35, max_rounds=5, make_queries=lambda q, docs: ["same query"]
    )
    assert search.queries == [["same query"], [Q.text]]  # the verbatim question is the last resort
    assert r.stopped == "no_new_queries" and r.rounds == 2


def test_search_failure_and_deadline_are_degradations() -> None:
    def failing(queries: Sequence[str]) -> list[Strip]:
        raise SearchError("provider down", backend_id="x", step="search")

    r = correct_until_confident(Q, [], evaluate, failing, upper=0.6, lower=0.35, max_rounds=3)
    r2 = correct_until_confident(Q, [], evaluate, Searcher(), upper=0.6, lower=0.35, max_rounds=3, deadline=Deadline(0))
    assert r.stopped == "search_failed" and r.abstain and r.rounds == 1
    assert r2.stopped == "deadline" and r2.rounds == 0
    assert "provider down" in r.degradations[0] and "deadline" in r2.degradations[0]


def test_failed_llm_rewrite_falls_back_to_keywords() -> None:
    def bad(question: str, docs: Sequence[str]) -> list[str]:
        raise LLMReplyError("no queries in reply")

    search = Searcher([s("The Eiffel Tower was completed in 1889.")])
    r = correct_until_confident(Q, [], evaluate, search, upper=0.6, lower=0.35, max_rounds=1, make_queries=bad)
    assert r.confident and search.queries[0] and "rewrite failed" in r.degradations[0]


def test_duplicate_strips_are_graded_once() -> None:
    calls: list[int] = []

    def counting(question: str, strips: Sequence[Strip]) -> list[float]:
        calls.append(len(strips))
        return evaluate(question, strips)

    same = s("The Eiffel Tower is in Paris.")
    correct_until_confident(Q, [same], counting, Searcher([same], [same]), upper=0.6, lower=0.35, max_rounds=2)
    assert calls == [1]
    with pytest.raises(ValueError):
        correct_until_confident(Q, [], evaluate, Searcher(), upper=0.6, lower=0.35, max_rounds=-1)
