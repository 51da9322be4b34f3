"""Paired statistics for two runs over the same cases: paired bootstrap and McNemar's test.

Both resample or count *cases*, the unit the run metrics resample (results/bootstrap.py): a
comparison of two models on the same sample ids is paired, and ignoring the pairing would make
every interval far too wide (the between-case variance dominates the between-model one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_toolbench.lazy_import import LazyModule
from pytest_toolbench.results.bootstrap import (
    Estimate,
    bootstrap_mean,
    percentile_interval,
    resample_indices,
    resampled_ratios,
)
from pytest_toolbench.results.comparison import McNemar

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike
else:
    np = LazyModule("numpy")  # the plugin imports this module's models; numpy waits for a comparison

#: Below this many discordant pairs McNemar uses the exact binomial test, at or above it the
#: chi-square approximation with continuity correction (Edwards 1948).
EXACT_BELOW = 25


def mcnemar(b: int, c: int, *, exact_below: int = EXACT_BELOW) -> McNemar:
    """Two-sided McNemar test: exact binomial (b out of b+c at 1/2) when b+c < ``exact_below``,
    else chi-square with continuity correction, (|b-c|-1)^2/(b+c) on 1 degree of freedom."""
    from scipy.stats import binomtest, chi2  # imported here: every pytest start loads this module

    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return McNemar(b=b, c=c, p_value=1.0, method="exact")
    if n < exact_below:
        p = float(binomtest(b, n, 0.5, alternative="two-sided").pvalue)
        return McNemar(b=b, c=c, p_value=min(1.0, p), method="exact")
    stat = (abs(b - c) - 1.0) ** 2 / n
    return McNemar(b=b, c=c, p_value=float(chi2.sf(stat, 1)), method="chi2")


def mcnemar_from_outcomes(first: ArrayLike, second: ArrayLike) -> McNemar:
    """McNemar from two aligned 0/1 vectors (first run, second run)."""
    a = np.asarray(first, dtype=bool)
    s = np.asarray(second, dtype=bool)
    if a.shape != s.shape:
        raise ValueError(f"outcome vectors differ in shape: {a.shape} vs {s.shape}")
    return mcnemar(int(np.sum(a & ~s)), int(np.sum(~a & s)))


def is_binary(*vectors: ArrayLike) -> bool:
    """Whether every value is exactly 0 or 1 (a per-case right/wrong outcome)."""
    return all(np.isin(np.asarray(v, dtype=np.float64), (0.0, 1.0)).all() for v in vectors)


def paired_bootstrap_mean_diff(
    first: ArrayLike, second: ArrayLike, *, n_boot: int = 2000, seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """``mean(second) - mean(first)`` over paired cases with a percentile interval from
    resampling case *pairs*: the mean of the per-pair differences, bootstrapped as any per-case
    value (resampling pairs is resampling their differences)."""
    a = np.asarray(first, dtype=np.float64)
    s = np.asarray(second, dtype=np.float64)
    if a.shape != s.shape:
        raise ValueError(f"paired vectors differ in shape: {a.shape} vs {s.shape}")
    return bootstrap_mean(s - a, n_boot=n_boot, seed=seed, confidence=confidence)


def paired_bootstrap_ratio_diff(
    first_num: ArrayLike, first_den: ArrayLike, second_num: ArrayLike, second_den: ArrayLike,
    *, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95,
) -> Estimate:
    """``sum(num2)/sum(den2) - sum(num1)/sum(den1)`` over paired cases, resampling whole pairs.

    Undefined (None) when either run's total denominator is 0; resamples where either
    denominator sums to 0 are dropped from the interval, as in ``bootstrap_ratio``."""
    arrays = [np.asarray(x, dtype=np.float64)
              for x in (first_num, first_den, second_num, second_den)]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError("paired ratio vectors differ in shape")
    an, ad, sn, sd = arrays
    n = int(an.size)
    if n == 0 or ad.sum() == 0.0 or sd.sum() == 0.0:
        return Estimate(None, None, None, n)
    estimate = float(sn.sum() / sd.sum() - an.sum() / ad.sum())
    if np.isnan(estimate):
        return Estimate(estimate, estimate, estimate, n)
    idx = resample_indices(n, n_boot=n_boot, seed=seed)  # one index matrix for both runs
    stats = resampled_ratios(sn, sd, idx) - resampled_ratios(an, ad, idx)  # NaN if either is
    low, high = percentile_interval(stats, estimate, confidence)
    return Estimate(estimate, low, high, n)
