"""Pick tau_low / tau_high on labelled (query, passage) pairs.

Each graded passage is routed like a one-document CRAG decision: score ≥ upper → trust
it (Correct); score ≤ lower → discard it (Incorrect); in between → keep it and search
(Ambiguous). Two objectives:

* ``accuracy``: routing accuracy, where trusting a relevant passage and discarding an
  irrelevant one are right, the opposite two are wrong, and Ambiguous counts as half
  right (it hedges, at the price of a search);
* ``cost``: the expected cost per passage with ``cost_wrong`` for trusting an irrelevant
  passage (a wrong answer), ``cost_discard`` for discarding a relevant one, and
  ``cost_search`` for every external search (Ambiguous and Incorrect).

>>> r = choose_thresholds([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1])
>>> r.lower < r.upper and r.accuracy == 1.0
True
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crag.atomic import write_atomic
from crag.grade.metrics import auroc, expected_calibration_error, reliability_bins


@dataclass
class Calibration:
    """Chosen thresholds and how they route the labelled pairs."""

    lower: float
    upper: float
    objective: str
    auroc: float
    accuracy: float  # routing accuracy as defined above
    cost: float  # expected cost per passage
    precision_correct: float  # of passages trusted, share relevant
    recall_correct: float  # of relevant passages, share trusted
    precision_incorrect: float  # of passages discarded, share irrelevant
    recall_incorrect: float  # of irrelevant passages, share discarded
    share: dict[str, float] = field(default_factory=dict)  # routing distribution
    ece: float = float("nan")
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def route(scores: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """0 = Incorrect, 1 = Ambiguous, 2 = Correct, per passage."""
    return np.where(scores >= upper, 2, np.where(scores <= lower, 0, 1))


def evaluate_thresholds(
    labels: Sequence[int] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    lower: float,
    upper: float,
    *,
    cost_wrong: float = 10.0,
    cost_discard: float = 3.0,
    cost_search: float = 1.0,
    objective: str = "accuracy",
) -> Calibration:
    y = np.asarray(labels, dtype=float) > 0.5
    s = np.asarray(scores, dtype=float)
    r = route(s, lower, upper)
    trust, hedge, drop = r == 2, r == 1, r == 0
    right = (trust & y) | (drop & ~y)
    acc = float((right.sum() + 0.5 * hedge.sum()) / max(1, y.size))
    cost = float(
        (cost_wrong * (trust & ~y).sum() + cost_discard * (drop & y).sum() + cost_search * (hedge | drop).sum())
        / max(1, y.size)
    )

    def ratio(a: np.ndarray, b: np.ndarray) -> float:
        return round(float(a.sum() / b.sum()), 4) if b.sum() else float("nan")

    return Calibration(
        lower=round(lower, 4),
        upper=round(upper, 4),
        objective=objective,
        auroc=auroc(y.astype(int), s),
        accuracy=round(acc, 4),
        cost=round(cost, 4),
        precision_correct=ratio(trust & y, trust),
        recall_correct=ratio(trust & y, y),
        precision_incorrect=ratio(drop & ~y, drop),
        recall_incorrect=ratio(drop & ~y, ~y),
        share={
            "correct": ratio(trust, np.ones_like(y)),
            "ambiguous": ratio(hedge, np.ones_like(y)),
            "incorrect": ratio(drop, np.ones_like(y)),
        },
        ece=expected_calibration_error(reliability_bins(y.astype(int), s)),
        n=int(y.size),
    )


def choose_thresholds(
    labels: Sequence[int],
    scores: Sequence[float],
    *,
    objective: str = "accuracy",
    cost_wrong: float = 10.0,
    cost_discard: float = 3.0,
    cost_search: float = 1.0,
    min_gap: float = 0.05,
) -> Calibration:
    """Grid-search (lower, upper) over score quantiles for the best objective value."""
    if objective not in ("accuracy", "cost"):
        raise ValueError(f"unknown objective {objective!r}; use 'accuracy' or 'cost'")
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        raise ValueError("no labelled pairs to calibrate on")
    grid = np.unique(np.round(np.concatenate([np.quantile(s, np.linspace(0, 1, 41)), np.linspace(0.05, 0.95, 19)]), 3))
    best: Calibration | None = None
    for lo in grid:
        for hi in grid:
            if hi - lo < min_gap or not 0 <= lo < hi <= 1:
                continue
            c = evaluate_thresholds(
                labels,
                s,
                float(lo),
                float(hi),
                cost_wrong=cost_wrong,
                cost_discard=cost_discard,
                cost_search=cost_search,
                objective=objective,
            )
            better = (
                best is None
                or (objective == "accuracy" and (c.accuracy, -c.cost) > (best.accuracy, -best.cost))
                or (objective == "cost" and (-c.cost, c.accuracy) > (-best.cost, best.accuracy))
            )
            if better:
                best = c
    assert best is not None
    return best


def reliability_plot(labels: Sequence[int], scores: Sequence[float], path: Path, *, title: str = "") -> Path:
    """Save a reliability diagram (PNG): mean score against observed relevance per bin."""
    from crag.extras import require

    matplotlib = require("matplotlib", "eval", "the reliability diagram")

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = reliability_bins(np.asarray(labels), np.asarray(scores))
    xs = [b.mean_score for b in bins if b.count]
    ys = [b.positive_rate for b in bins if b.count]
    ns = [b.count for b in bins if b.count]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(5, 6), height_ratios=[3, 1], sharex=True)
    ax.plot([0, 1], [0, 1], "--", color="grey", label="perfectly calibrated")
    ax.plot(xs, ys, "o-", color="tab:blue", label="evaluator")
    ax.set_ylabel("observed share relevant")
    ax.set_title(title or "Reliability")
    ax.legend(loc="upper left")
    ax2.bar([b.lo + 0.05 for b in bins], [b.count for b in bins], width=0.09, color="tab:grey")
    ax2.set_xlabel("evaluator score")
    ax2.set_ylabel("pairs")
    ax2.set_xlim(0, 1)
    del ns
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_thresholds(path: Path, upper: float, lower: float) -> None:
    """Set ``[evaluator] upper/lower`` in a TOML file, keeping everything else."""
    import tomli_w

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the same parser, before it joined the standard library
        import tomli as tomllib

    data: dict[str, Any] = {}
    if path.is_file():
        data = tomllib.loads(path.read_text("utf-8"))
    data.setdefault("evaluator", {}).update({"upper": upper, "lower": lower})
    write_atomic(path, tomli_w.dumps(data))
