"""The CRAG decision: a pure function from grades and thresholds to an action.

Two rules are supported:

* ``paper`` (Yan et al., 2024): Correct if any passage scores ≥ upper; Incorrect if
  every passage scores ≤ lower; otherwise Ambiguous.
* ``set`` (the article's): compare the set-level confidence s with tau_high / tau_low.

>>> from crag.types import Grade
>>> decide([Grade("a", 0.9), Grade("b", 0.1)], confidence=0.5, upper=0.6, lower=0.35).value
'correct'
>>> decide([Grade("a", 0.5)], confidence=0.5, upper=0.6, lower=0.35, rule="set").value
'ambiguous'
"""

from __future__ import annotations

from collections.abc import Sequence

from crag.types import Action, Grade


def decide(
    grades: Sequence[Grade],
    *,
    confidence: float,
    upper: float,
    lower: float,
    rule: str = "paper",
) -> Action:
    """Choose Correct / Ambiguous / Incorrect. No grades at all means Incorrect."""
    if not lower < upper:
        raise ValueError(f"lower threshold {lower} must be below upper threshold {upper}")
    if not grades:
        return Action.INCORRECT
    if rule == "paper":
        scores = [g.score for g in grades]
        if any(s >= upper for s in scores):
            return Action.CORRECT
        if all(s <= lower for s in scores):
            return Action.INCORRECT
        return Action.AMBIGUOUS
    if rule == "set":
        if confidence >= upper:
            return Action.CORRECT
        if confidence <= lower:
            return Action.INCORRECT
        return Action.AMBIGUOUS
    raise ValueError(f"unknown decision rule {rule!r}; use 'paper' or 'set'")
