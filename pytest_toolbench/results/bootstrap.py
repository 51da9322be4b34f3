"""Percentile-bootstrap confidence intervals over cases, for means and ratios of sums.

Cases are the resampling unit (a ToolHop query, not a tool call), because calls within one case
are correlated. Everything is vectorised: one ``(n_boot, n)`` index matrix per call. The index
matrix depends only on ``(n, n_boot, seed)``, so two metrics over the same case list (or a baseline
and a candidate run over the same sample ids, for a later paired gate) see the same resamples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from pytest_toolbench.lazy_import import LazyModule
from pytest_toolbench.results import estimate_memo

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray
else:
    np = LazyModule("numpy")  # imported when a metric is computed, not by every pytest process

#: Float noise below this is treated as "equal to the point estimate" so a constant sample
#: (or n = 1) gives a CI that collapses exactly onto the value instead of 0.7000000000000001.
_SNAP = 1e-12


class Estimate(NamedTuple):
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


def resample_indices(n: int, *, n_boot: int, seed: int) -> NDArray[np.intp]:
    """The ``(n_boot, n)`` matrix of case indices drawn with replacement (deterministic)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_boot, n))


def resampled_ratios(
    numerators: NDArray[np.float64], denominators: NDArray[np.float64], indices: NDArray[np.intp]
) -> NDArray[np.float64]:
    """``sum(num) / sum(den)`` of each resample (a row of ``indices``); NaN where the resample
    drew only zero-denominator cases, so :func:`percentile_interval` leaves it out rather than
    counting it as 0."""
    boot_den = denominators[indices].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(boot_den != 0.0, numerators[indices].sum(axis=1) / boot_den, np.nan)


def percentile_interval(
    stats: NDArray[np.float64], estimate: float, confidence: float
) -> tuple[float | None, float | None]:
    """Percentile CI of bootstrap replicates; NaN replicates (0/0 ratios) are ignored."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return None, None
    alpha = (1.0 - confidence) / 2.0
    low, high = (float(x) for x in np.quantile(finite, [alpha, 1.0 - alpha]))
    if abs(low - estimate) <= _SNAP:
        low = estimate
    if abs(high - estimate) <= _SNAP:
        high = estimate
    return low, high


def _kept_or_computed(kind: str, columns: tuple[ArrayLike, ...], n_boot: int, seed: int,
                      confidence: float, compute: Callable[[], Estimate]) -> Estimate:
    """``compute()``, or the estimate kept for the same inputs (estimate_memo.py: a cached re-run
    ends without importing numpy)."""
    memo = estimate_memo.active()
    if memo is None:
        return compute()
    key = estimate_memo.input_key(kind, columns, n_boot, seed, confidence)  # type: ignore[arg-type]
    return Estimate(*memo.estimate(key, compute))


def bootstrap_mean(
    values: ArrayLike, *, n_boot: int = 2000, seed: int = 0, confidence: float = 0.95
) -> Estimate:
    """Mean of per-case values with a percentile-bootstrap CI."""
    return _kept_or_computed("mean", (values,), n_boot, seed, confidence,
                             lambda: _bootstrap_mean(values, n_boot, seed, confidence))


def _bootstrap_mean(values: ArrayLike, n_boot: int, seed: int, confidence: float) -> Estimate:
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return Estimate(None, None, None, 0)
    estimate = float(x.mean())
    if np.isnan(estimate) or np.all(x == x[0]):
        # constant sample: every resample equals the estimate; a nan value (an upstream mean of
        # no scores) makes the mean nan, and its interval is nan too, not one from the resamples
        # that happened to miss that case
        return Estimate(estimate, estimate, estimate, n)
    stats = x[resample_indices(n, n_boot=n_boot, seed=seed)].mean(axis=1)
    low, high = percentile_interval(stats, estimate, confidence)
    return Estimate(estimate, low, high, n)


def bootstrap_ratio(
    numerators: ArrayLike,
    denominators: ArrayLike,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """``sum(num) / sum(den)`` over cases, resampling whole cases (num and den together).

    A ratio whose total denominator is 0 is undefined: value None. Resamples that draw only
    zero-denominator cases are dropped from the interval rather than counted as 0.
    """
    return _kept_or_computed(
        "ratio", (numerators, denominators), n_boot, seed, confidence,
        lambda: _bootstrap_ratio(numerators, denominators, n_boot, seed, confidence))


def _bootstrap_ratio(numerators: ArrayLike, denominators: ArrayLike, n_boot: int, seed: int,
                     confidence: float) -> Estimate:
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.shape != den.shape:
        raise ValueError(f"numerators {num.shape} and denominators {den.shape} differ in shape")
    n = int(num.size)
    total_den = float(den.sum()) if n else 0.0
    if n == 0 or total_den == 0.0:
        return Estimate(None, None, None, n)
    estimate = float(num.sum()) / total_den
    if np.isnan(estimate):  # a nan numerator: nan, as for the mean
        return Estimate(estimate, estimate, estimate, n)
    stats = resampled_ratios(num, den, resample_indices(n, n_boot=n_boot, seed=seed))
    low, high = percentile_interval(stats, estimate, confidence)
    return Estimate(estimate, low, high, n)
