"""McNemar and the paired bootstrap against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_toolbench.compare.stats import (
    is_binary,
    mcnemar,
    mcnemar_from_outcomes,
    paired_bootstrap_mean_diff,
    paired_bootstrap_ratio_diff,
)
from pytest_toolbench.results.bootstrap import bootstrap_mean


def test_exact_mcnemar_matches_the_binomial_by_hand() -> None:
    # b=1, c=4: P(X<=1 | n=5, 1/2) = (1 + 5)/32; two-sided doubles it.
    t = mcnemar(1, 4)
    assert (t.b, t.c, t.method) == (1, 4, "exact")
    assert t.p_value == pytest.approx(2 * 6 / 32)
    # b=0, c=2: 2 * (1/4) = 0.5
    assert mcnemar(0, 2).p_value == pytest.approx(0.5)
    # balanced discordance: p = 1 (capped), still exact below 25 discordant pairs
    assert mcnemar(12, 12).p_value == pytest.approx(1.0)
    assert mcnemar(12, 12).method == "exact"


def test_no_discordant_pair_gives_p_1() -> None:
    t = mcnemar(0, 0)
    assert t.p_value == 1.0 and (t.b, t.c) == (0, 0)


def test_many_discordant_pairs_use_chi_square_with_continuity_correction() -> None:
    # b=5, c=20: chi2 = (|5-20|-1)^2/25 = 7.84; for 1 dof, P(X > x) = erfc(sqrt(x/2)).
    t = mcnemar(5, 20)
    assert t.method == "chi2"
    assert t.p_value == pytest.approx(math.erfc(math.sqrt(7.84 / 2)), rel=1e-9)
    assert t.p_value == pytest.approx(0.00511, abs=1e-5)
    # 24 discordant pairs: still exact
    assert mcnemar(4, 20).method == "exact"


def test_mcnemar_from_outcome_vectors_counts_b_and_c() -> None:
    a = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1]
    t = mcnemar_from_outcomes(a, b)
    assert (t.b, t.c) == (1, 4)
    with pytest.raises(ValueError, match="shape"):
        mcnemar_from_outcomes([1, 0], [1])
    with pytest.raises(ValueError):
        mcnemar(-1, 2)


def test_is_binary() -> None:
    assert is_binary([0, 1, 1.0], [0.0])
    assert not is_binary([0, 0.5])


def test_paired_mean_difference_and_its_interval() -> None:
    a = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0], dtype=float)
    b = np.array([1, 1, 1, 1, 1, 0, 1, 1, 1, 1], dtype=float)
    est = paired_bootstrap_mean_diff(a, b, n_boot=4000, seed=7)
    assert est.value == pytest.approx(0.3)  # 9/10 - 6/10
    assert est.n == 10
    # The interval is the percentile interval of resampled *pair* means (same rows for A and B).
    idx = np.random.default_rng(7).integers(0, 10, size=(4000, 10))
    boot = (b - a)[idx].mean(axis=1)
    assert (est.ci_low, est.ci_high) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])))
    assert est.ci_low < 0.3 < est.ci_high
    # Seeded: the same call gives the same interval.
    assert paired_bootstrap_mean_diff(a, b, n_boot=4000, seed=7) == est


def test_pairing_makes_a_constant_shift_exact() -> None:
    a = np.array([0.1, 0.9, 0.4, 0.7, 0.2])
    est = paired_bootstrap_mean_diff(a, a + 0.1)
    assert est.value == pytest.approx(0.1)
    assert (est.ci_low, est.ci_high) == (est.value, est.value)
    same = paired_bootstrap_mean_diff(a, a)
    assert (same.value, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)


def test_paired_interval_is_narrower_than_the_unpaired_one_for_correlated_runs() -> None:
    rng = np.random.default_rng(1)
    a = (rng.random(200) < 0.5).astype(float)
    b = a.copy()
    b[:10] = 1.0  # B fixes a few of A's cases, agrees on the rest
    paired = paired_bootstrap_mean_diff(a, b)
    i1 = np.random.default_rng(0).integers(0, 200, size=(2000, 200))
    i2 = np.random.default_rng(1).integers(0, 200, size=(2000, 200))
    unpaired = np.quantile(b[i1].mean(axis=1) - a[i2].mean(axis=1), [0.025, 0.975])
    assert (paired.ci_high - paired.ci_low) < (unpaired[1] - unpaired[0]) / 2


def test_paired_ratio_difference() -> None:
    # A: 3/6 = 0.5, B: 1/6; difference -1/3.
    est = paired_bootstrap_ratio_diff([1, 0, 2], [2, 2, 2], [0, 0, 1], [2, 2, 2])
    assert est.value == pytest.approx(1 / 6 - 0.5)
    assert est.ci_low <= est.value <= est.ci_high
    # Undefined when a run's denominators sum to 0.
    assert paired_bootstrap_ratio_diff([0], [0], [1], [1]).value is None
    assert paired_bootstrap_mean_diff([], []).n == 0


def test_paired_intervals_draw_the_run_metrics_resamples() -> None:
    """The paired difference is bootstrapped by results/bootstrap.py (the same index matrix for
    a seed as the run's own CIs), and its numbers are the ones the paired code gave when it had a
    copy of that resampling: pinned here, so a change to the draws or to the interval shows."""
    a = [1, 0, 1, 1, 0, 1, 0, 0, 1, 1]
    b = [1, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    est = paired_bootstrap_mean_diff(a, b, n_boot=500, seed=3)
    assert tuple(est) == (0.2, -0.2, 0.6, 10)
    assert est == bootstrap_mean(np.subtract(b, a, dtype=float), n_boot=500, seed=3)
    # zero denominators in both runs: resamples drawing only those are left out of the interval
    ratio = paired_bootstrap_ratio_diff([1, 0, 2, 3, 1, 0], [2, 0, 2, 3, 1, 1],
                                        [0, 1, 2, 1, 1, 0], [2, 2, 0, 3, 1, 1], n_boot=500, seed=3)
    assert tuple(ratio) == (-0.2222222222222222, -0.5259821428571426, 0.6899999999999991, 6)
