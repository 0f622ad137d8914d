"""Paired statistics for "is CRAG better than RAG on the same questions?".

Each question is answered in both modes, so the comparison is paired: a paired t-test
(``scipy.stats.ttest_rel`` when scipy is installed — the ``crag[eval]`` extra — else the
same test computed here) and a seeded paired bootstrap 95% confidence interval of the
mean difference, which does not assume normal differences (most metrics are 0/1).

>>> r = paired_test("accuracy", [0, 1, 0, 0, 1, 0], [1, 1, 0, 1, 1, 0], seed=0)
>>> round(r.mean_diff, 3), r.n
(0.333, 6)
>>> r.ci_low <= r.mean_diff <= r.ci_high
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["PairedResult", "bootstrap_ci", "mean_ci", "paired_test", "t_test_rel"]

BOOTSTRAP_SAMPLES = 5000


@dataclass
class PairedResult:
    """CRAG − RAG (or ``b − a``) for one metric over the questions both modes answered.

    >>> PairedResult("f1", 10, 0.4, 0.5, 0.1, 0.02, 0.18, 2.1, 0.06).significant
    False
    """

    metric: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    ci_low: float
    ci_high: float
    t: float | None  # None when the test is undefined (n < 2 or every difference equal)
    p: float | None

    @property
    def significant(self) -> bool:
        """p < 0.05 for the paired t-test."""
        return self.p is not None and self.p < 0.05

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"significant": self.significant}


def paired_test(
    metric: str, a: Sequence[float], b: Sequence[float], *, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES
) -> PairedResult:
    """Paired t-test and bootstrap CI of ``mean(b - a)``; ``a`` is the baseline."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length ({len(a)} vs {len(b)})")
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(xa)
    if n == 0:
        nan = float("nan")
        return PairedResult(metric, 0, nan, nan, nan, nan, nan, None, None)
    diff = xb - xa
    low, high = bootstrap_ci(diff, seed=seed, samples=samples)
    t, p = t_test_rel(xa, xb)
    return PairedResult(metric, n, float(xa.mean()), float(xb.mean()), float(diff.mean()), low, high, t, p)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, *, seed: int = 0, samples: int = BOOTSTRAP_SAMPLES, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (resampling questions with replacement)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def mean_ci(values: Sequence[float], *, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) with a bootstrap 95% interval: the error bars of the report."""
    if not len(values):
        nan = float("nan")
        return nan, nan, nan
    low, high = bootstrap_ci(values, seed=seed)
    return float(np.mean(values)), low, high


def t_test_rel(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None]:
    """Two-sided paired t-test; (None, None) when undefined (n < 2 or zero variance)."""
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = len(d)
    # Identical differences (up to float rounding, e.g. two equal latency gaps): the statistic is
    # ±inf or NaN, and scipy warns of catastrophic cancellation; report "no test" instead.
    if n < 2 or float(np.std(d, ddof=1)) <= 1e-9 * max(1.0, float(np.max(np.abs(d)))):
        return None, None
    try:
        from scipy import stats
    except ImportError:
        sd = float(np.std(d, ddof=1))
        t = float(d.mean()) / (sd / math.sqrt(n))
        return t, _t_two_sided_p(t, n - 1)
    res = stats.ttest_rel(b, a)
    return float(res.statistic), float(res.pvalue)


# -- fallback without scipy: Student-t tail through the regularised incomplete beta --------
def _t_two_sided_p(t: float, df: int) -> float:
    x = df / (df + t * t)
    return min(1.0, max(0.0, _betainc(df / 2.0, 0.5, x)))


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) by Lentz's continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    # The fraction converges fast only for x < (a+1)/(a+b+2); use the symmetry otherwise.
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-12:
            break
    return front * f / a
