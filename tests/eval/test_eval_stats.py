"""Paired statistics on inputs with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crag.eval.stats import _t_two_sided_p, bootstrap_ci, mean_ci, paired_test, t_test_rel

pytestmark = pytest.mark.unit

A = [1.0, 2.0, 3.0, 4.0, 5.0]
B = [2.0, 4.0, 5.0, 4.0, 7.0]  # differences 1, 2, 2, 0, 2: mean 1.4, sd sqrt(0.8) -> t = 3.5


def test_paired_t_test_known_value() -> None:
    t, p = t_test_rel(np.array(A), np.array(B))
    assert t == pytest.approx(3.5)
    assert p == pytest.approx(0.024896, abs=1e-5)  # Student t, 4 df, two-sided


@pytest.mark.parametrize(("t", "df", "p"), [(3.5, 4, 0.024896), (2.0, 10, 0.073388), (0.0, 7, 1.0), (-2.5, 30, 0.018)])
def test_fallback_t_distribution_matches_tables(t: float, df: int, p: float) -> None:
    assert _t_two_sided_p(t, df) == pytest.approx(p, abs=5e-4)


def test_paired_test_reports_difference_and_ci() -> None:
    r = paired_test("f1", A, B, seed=1)
    assert (r.n, r.mean_a, r.mean_b, r.mean_diff) == (5, 3.0, 4.4, pytest.approx(1.4))
    assert 0.0 <= r.ci_low < 1.4 < r.ci_high <= 2.0  # bootstrap means lie within [min, max] of the diffs
    assert r.significant
    assert paired_test("f1", A, B, seed=1).ci_low == r.ci_low  # seeded: reproducible


def test_undefined_cases() -> None:
    same = paired_test("accuracy", [0, 1, 1], [1, 2, 2])  # every difference is 1
    assert same.t is None and same.p is None and not same.significant
    assert (same.ci_low, same.ci_high) == (1.0, 1.0)
    empty = paired_test("accuracy", [], [])
    assert empty.n == 0 and math.isnan(empty.mean_diff)
    with pytest.raises(ValueError):
        paired_test("accuracy", [1], [1, 2])


def test_bootstrap_ci_of_constant_and_mean_ci() -> None:
    assert bootstrap_ci([0.5] * 10) == (0.5, 0.5)
    mean, low, high = mean_ci([0, 1, 0, 1, 1, 1, 0, 1], seed=0)
    assert mean == 0.625 and 0.2 < low < mean < high <= 1.0


def test_differences_equal_up_to_rounding_give_no_test() -> None:
    from crag.eval.stats import t_test_rel

    a = np.array([0.1, 0.2])
    b = a + np.array([0.0008, 0.0008 + 1e-19])  # what two equal timing gaps look like in floats
    assert t_test_rel(a, b) == (None, None)
    assert t_test_rel(np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.2, 0.9]))[1] is not None
