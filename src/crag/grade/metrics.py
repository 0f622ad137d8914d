"""Metrics for relevance scorers (numpy only): AUROC, accuracy, threshold, reliability.

>>> from crag.grade.metrics import auroc, accuracy_at, best_threshold
>>> auroc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9])
1.0
>>> auroc([0, 1], [0.5, 0.5])
0.5
>>> accuracy_at([0, 1, 1], [0.2, 0.4, 0.9], 0.5)
0.6667
>>> best_threshold([0, 0, 1, 1], [0.1, 0.3, 0.6, 0.9])
0.45
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike


def _arrays(labels: ArrayLike, scores: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=np.float64).ravel()
    s = np.asarray(scores, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(f"labels ({y.size}) and scores ({s.size}) differ in length")
    return y, s


def _ranks(s: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # boundaries of runs of equal scores
    edges = np.flatnonzero(np.diff(sorted_s)) + 1
    starts = np.concatenate(([0], edges))
    ends = np.concatenate((edges, [len(s)]))
    for a, b in zip(starts, ends, strict=True):
        ranks[order[a:b]] = (a + b + 1) / 2.0
    return ranks


def auroc(labels: ArrayLike, scores: ArrayLike) -> float:
    """Area under the ROC curve (Mann–Whitney U); ties count one half.

    Returns ``nan`` when only one class is present.
    """
    y, s = _arrays(labels, scores)
    pos = y > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = _ranks(s)
    u = r[pos].sum() - n_pos * (n_pos + 1) / 2.0
    return round(float(u / (n_pos * n_neg)), 6)


def accuracy_at(labels: ArrayLike, scores: ArrayLike, threshold: float) -> float:
    """Share of pairs where ``score >= threshold`` agrees with the label."""
    y, s = _arrays(labels, scores)
    if y.size == 0:
        return float("nan")
    return round(float(np.mean((s >= threshold) == (y > 0.5))), 4)


def best_threshold(labels: ArrayLike, scores: ArrayLike) -> float:
    """The accuracy-maximising threshold: a midpoint between adjacent distinct scores.

    Ties in accuracy go to the threshold nearest the median of the candidates, so the
    choice is stable.
    """
    y, s = _arrays(labels, scores)
    if y.size == 0:
        return 0.5
    u = np.unique(s)
    cands = np.concatenate(([u[0] - 1e-6], (u[:-1] + u[1:]) / 2, [u[-1] + 1e-6]))
    pos = y > 0.5
    # accuracy for each candidate in one pass via sorted cumulative counts
    order = np.argsort(s)
    ss, pp = s[order], pos[order]
    below = np.searchsorted(ss, cands, side="left")  # items with score < t
    neg_below = np.concatenate(([0], np.cumsum(~pp)))[below]
    pos_above = int(pp.sum()) - np.concatenate(([0], np.cumsum(pp)))[below]
    acc = (neg_below + pos_above) / y.size
    best = np.flatnonzero(acc >= acc.max() - 1e-12)
    mid = best[len(best) // 2]
    return round(float(cands[mid]), 4)


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability diagram: its score range, size, mean score and positive rate."""

    lo: float
    hi: float
    count: int
    mean_score: float
    positive_rate: float


def reliability_bins(labels: ArrayLike, scores: ArrayLike, n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins over [0, 1]: how often pairs scored in a bin are really relevant."""
    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    y, s = _arrays(labels, scores)
    idx = np.clip((s * n_bins).astype(int), 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        sel = idx == b
        n = int(sel.sum())
        out.append(
            ReliabilityBin(
                b / n_bins,
                (b + 1) / n_bins,
                n,
                round(float(s[sel].mean()), 4) if n else float("nan"),
                round(float(y[sel].mean()), 4) if n else float("nan"),
            )
        )
    return out


def expected_calibration_error(bins: Sequence[ReliabilityBin]) -> float:
    """Count-weighted mean gap between bin score and bin positive rate."""
    total = sum(b.count for b in bins)
    if not total:
        return float("nan")
    return round(sum(b.count * abs(b.mean_score - b.positive_rate) for b in bins if b.count) / total, 4)
