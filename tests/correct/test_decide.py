"""The decision function, from a table of cases."""

import pytest

from crag.decide import decide
from crag.types import Action, Grade

pytestmark = pytest.mark.unit

U, L = 0.6, 0.35


@pytest.mark.parametrize(
    ("scores", "confidence", "rule", "expected"),
    [
        ([0.9, 0.1, 0.1], 0.4, "paper", Action.CORRECT),  # any doc >= upper
        ([0.6], 0.6, "paper", Action.CORRECT),  # boundary: >= upper
        ([0.1, 0.2, 0.35], 0.2, "paper", Action.INCORRECT),  # all <= lower (boundary included)
        ([0.1, 0.36], 0.2, "paper", Action.AMBIGUOUS),  # one just above lower
        ([0.59, 0.59], 0.59, "paper", Action.AMBIGUOUS),
        ([], 0.0, "paper", Action.INCORRECT),  # nothing retrieved
        ([0.9], 0.7, "set", Action.CORRECT),
        ([0.9], 0.6, "set", Action.CORRECT),  # s >= tau_high
        ([0.9], 0.5, "set", Action.AMBIGUOUS),  # the set rule ignores single docs
        ([0.1], 0.35, "set", Action.INCORRECT),  # s <= tau_low
        ([0.1], 0.36, "set", Action.AMBIGUOUS),
    ],
)
def test_decide_table(scores: list[float], confidence: float, rule: str, expected: Action) -> None:
    grades = [Grade(str(i), s) for i, s in enumerate(scores)]
    assert decide(grades, confidence=confidence, upper=U, lower=L, rule=rule) is expected


def test_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="below"):
        decide([Grade("a", 0.5)], confidence=0.5, upper=0.3, lower=0.4)


def test_unknown_rule() -> None:
    with pytest.raises(ValueError, match="unknown decision rule"):
        decide([Grade("a", 0.5)], confidence=0.5, upper=U, lower=L, rule="vote")
