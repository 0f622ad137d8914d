"""The ensemble evaluator: weighted mean, member reasons, and the agreement rule."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from crag.config import CragSettings
from crag.decide import decide
from crag.errors import ConfigError, CragError, LLMError
from crag.grade.classify import query_for
from crag.grade.ensemble import EnsembleEvaluator
from crag.grade.heuristic import HeuristicEvaluator, set_confidence
from crag.protocols import Evaluator
from crag.registry import EVALUATORS, BackendDeps
from crag.testing.fakes import FixedEvaluator, ScriptedLLM
from crag.types import Action, Evaluation, Passage, Query

pytestmark = pytest.mark.unit

PASSAGES = [Passage("a", "first"), Passage("b", "second")]
UPPER, LOWER = 0.6, 0.35


class BrokenEvaluator:
    name = "broken"

    def grade(self, query: Query, passages: Sequence[Passage]) -> Evaluation:
        raise LLMError("model crashed", backend_id="x", step="grade")


def ens(*members: Evaluator, agree: bool = True, weights: list[float] | None = None) -> EnsembleEvaluator:
    return EnsembleEvaluator(members, weights, agree=agree)


def asked(rule: str = "paper", upper: float = UPPER, lower: float = LOWER) -> Query:
    """A question whose thresholds and rule were decided for the request (the ensemble reads them)."""
    return Query("q", "en", upper=upper, lower=lower, rule=rule)


def action(ev: Evaluation, rule: str = "paper") -> Action:
    return decide(ev.grades, confidence=ev.confidence, upper=UPPER, lower=LOWER, rule=rule)


def test_weighted_mean_and_reasons() -> None:
    e = ens(FixedEvaluator("x", [0.9, 0.1]), FixedEvaluator("y", [0.3, 0.4]), weights=[3, 1])
    ev = e.grade(Query.of("q"), PASSAGES)
    assert [g.score for g in ev.grades] == [pytest.approx(0.75), pytest.approx(0.175)]
    assert ev.confidence == set_confidence(ev.grades)
    assert ev.grades[0].signals == {"x": 0.9, "y": 0.3}
    assert "x 0.90 (x says 0.9)" in ev.grades[0].reason and "y 0.30" in ev.grades[0].reason
    assert ev.reason.startswith("x ") and "→" in ev.reason
    assert ev.evaluator == "ensemble" and isinstance(e, Evaluator)


@pytest.mark.parametrize("rule", ["paper", "set"])
def test_incorrect_only_when_all_members_agree(rule: str) -> None:
    low = ens(FixedEvaluator("x", [0.1, 0.05]), FixedEvaluator("y", [0.2, 0.1])).grade(asked(rule), PASSAGES)
    assert action(low, rule) is Action.INCORRECT
    assert "all members agree" in low.reason


@pytest.mark.parametrize("rule", ["paper", "set"])
def test_disagreement_lifts_to_ambiguous(rule: str) -> None:
    # x alone is confident the first passage is relevant; y and z are sure nothing is: the
    # mean (0.3) would discard the internal documents without the agreement rule.
    members = [
        FixedEvaluator("x", [0.7, 0.0]),
        FixedEvaluator("y", [0.1, 0.0]),
        FixedEvaluator("z", [0.1, 0.0]),
    ]
    plain = ens(*members, agree=False).grade(asked(rule), PASSAGES)
    assert action(plain, rule) is Action.INCORRECT
    lifted = ens(*members).grade(asked(rule), PASSAGES)
    assert action(lifted, rule) is Action.AMBIGUOUS
    assert lifted.grades[0].score == pytest.approx(LOWER + 0.01)
    assert lifted.grades[1].score == plain.grades[1].score  # only the best passage is lifted
    assert lifted.grades[0].signals["agreement_lift"] > 0
    assert "members disagree (x not Incorrect)" in lifted.reason
    assert LOWER < lifted.confidence < UPPER


def test_lift_stays_below_upper_with_narrow_thresholds() -> None:
    e = EnsembleEvaluator([FixedEvaluator("x", [0.52, 0.0]), FixedEvaluator("y", [0.0, 0.0])])
    ev = e.grade(asked(upper=0.51, lower=0.5), PASSAGES)
    assert 0.5 < ev.grades[0].score < 0.51
    assert decide(ev.grades, confidence=ev.confidence, upper=0.51, lower=0.5) is Action.AMBIGUOUS


def test_correct_decisions_are_untouched() -> None:
    ev = ens(FixedEvaluator("x", [0.95, 0.1]), FixedEvaluator("y", [0.1, 0.1])).grade(Query.of("q"), PASSAGES)
    assert "agree" not in ev.reason and all("agreement_lift" not in g.signals for g in ev.grades)


def test_broken_member_is_left_out_and_reported() -> None:
    ev = ens(FixedEvaluator("x", [0.8, 0.2], degraded="x fell back"), BrokenEvaluator()).grade(Query.of("q"), PASSAGES)
    assert [g.score for g in ev.grades] == [0.8, 0.2]
    assert "x: x fell back" in ev.degraded and "broken failed (model crashed)" in ev.degraded
    with pytest.raises(CragError, match="every ensemble member failed"):
        ens(BrokenEvaluator()).grade(Query.of("q"), PASSAGES)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        EnsembleEvaluator([])
    with pytest.raises(ValueError):
        EnsembleEvaluator([FixedEvaluator("x", [])], weights=[1, 2])
    assert ens(FixedEvaluator("x", [])).grade(Query.of("q"), []).grades == []


def test_registry_builds_members_from_settings() -> None:
    # registers "llm" (this module imports crag.grade.ensemble) until crag.backends lists them
    import crag.grade.llm_judge  # noqa: F401

    s = CragSettings(
        evaluator={
            "backend": "ensemble",
            "upper": 0.6,
            "lower": 0.35,
            "ensemble": ["heuristic", "llm"],
            "ensemble_weights": {"llm": 2.0},
            "llm_mode": "per-doc",
            "rule": "set",
            "classify": True,
        }
    )
    ev = EVALUATORS.create("ensemble", s, BackendDeps(embedder=None, llm_factory=lambda: ScriptedLLM(["0.9", "0.0"])))
    assert isinstance(ev, EnsembleEvaluator)
    assert [m.name for m in ev.members] == ["heuristic", "llm"] and ev.weights == [1.0, 2.0]
    query = query_for("How tall is the tower?", s)  # what the ensemble's agreement rule decides with
    assert (query.rule, query.upper, query.lower) == ("set", 0.65, 0.35)  # factoid: stricter upper
    passages = [Passage("a", "The tower is 330 metres tall.", dense=0.9), Passage("b", "Bananas.", dense=0.7)]
    out = ev.grade(query, passages)
    assert out.grades[0].signals["llm"] == 0.9 and "heuristic" in out.grades[0].signals
    with pytest.raises(ConfigError, match="ensemble_weights"):
        EVALUATORS.create("ensemble", CragSettings(evaluator={"ensemble": ["heuristic"], "ensemble_weights": {"x": 1}}))
    with pytest.raises(ConfigError, match="itself"):
        EVALUATORS.create("ensemble", CragSettings(evaluator={"ensemble": ["ensemble"]}))


def test_heuristic_members_work_end_to_end() -> None:
    e = ens(HeuristicEvaluator(), HeuristicEvaluator())
    ev = e.grade(Query.of("capital of France"), [Passage("a", "Paris is the capital of France.", dense=0.9)])
    assert 0.0 <= ev.grades[0].score <= 1.0
