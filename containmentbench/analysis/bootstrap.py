"""Paired and scenario-cluster percentile bootstrap intervals (paper §6.5, eq. 12; §7.2).

The public functions validate their inputs once (`_validate`) and then hand the data to one
resampling engine, `bootstrap_distribution` (``resample.py``), which draws ``n_resamples``
values of the statistic

    theta* = sum_j w_j s_j / sum_j w_j c_j,        w ~ Multinomial(G, (1/G, ..., 1/G)),

where unit ``j`` (a pair, or a scenario cluster) has sum ``s_j`` and row count ``c_j``.  For
the pair bootstrap every pair is a unit with ``c_j = 1`` and theta* is the resampled mean of
the paired deltas of eq. (12); for the scenario-cluster bootstrap of §6.5 a unit is a whole
scenario with all of its seeds, and theta* is the mean over all retained rows.

This module holds the interval logic: the input checks, :class:`Interval` and the equal-tailed
percentile bounds of the pair and cluster bootstraps, the zero-event bounds and the paired win
rate. The exact kernels that draw theta*, and how one is chosen, are in ``resample.py``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from containmentbench.analysis.resample import (  # noqa: F401  (KERNELS re-exported)
    KERNELS,
    bootstrap_distribution,
)

__all__ = [
    "Interval",
    "cluster_bootstrap",
    "cluster_codes",
    "pair_bootstrap",
    "percentile_interval",
    "win_rate",
    "zero_event_bounds",
]

SeedLike = int | Sequence[int] | np.random.SeedSequence


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval for a mean or a paired mean difference (eq. 12)."""

    estimate: float
    """The statistic on the observed data (mean of the paired deltas / of the values)."""
    low: float
    """Lower percentile bound, the (1 - confidence) / 2 quantile of the resampled statistic."""
    high: float
    """Upper percentile bound, the (1 + confidence) / 2 quantile."""
    n: int
    """Number of rows (matched pairs, |P_g| in eq. 12)."""
    n_clusters: int | None
    """Number of scenario clusters resampled; None for the pair bootstrap."""
    confidence: float
    n_resamples: int
    method: str
    """``"pair-percentile"`` or ``"cluster-percentile"``."""

    @property
    def crosses_zero(self) -> bool:
        """True when 0 lies in [low, high]."""
        return self.low <= 0.0 <= self.high

    @property
    def tie(self) -> bool:
        """§6.5: an interval that crosses zero is a tie (or exploratory), not a win."""
        return self.crosses_zero


# --------------------------------------------------------------------------- public API


def pair_bootstrap(
    deltas: ArrayLike,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: SeedLike,
    batch: int | None = None,
) -> Interval:
    """Percentile bootstrap of the mean paired delta of eq. (12).

    ``deltas[i] = m(tau_{s,r,d_b}) - m(tau_{s,r,d_a})`` for matched pair ``(s, r)``; pairs
    are resampled with replacement, which keeps each within-pair comparison intact (§6.5).
    ``batch`` bounds memory: at most ``batch * len(deltas)`` indices exist at once.
    """
    checked = _validate(
        {"deltas": deltas},
        confidence=confidence,
        n_resamples=n_resamples,
        batch=batch,
        seed=seed,
    )
    x, rng = checked.arrays[0], checked.rng
    assert rng is not None
    samples, _ = bootstrap_distribution(x, None, n_resamples, rng, batch)
    low, high = percentile_interval(samples, confidence)
    return Interval(
        estimate=float(x.mean()),
        low=low,
        high=high,
        n=x.size,
        n_clusters=None,
        confidence=float(confidence),
        n_resamples=int(n_resamples),
        method="pair-percentile",
    )


def cluster_bootstrap(
    values: ArrayLike,
    clusters: Iterable[Hashable],
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: SeedLike,
    batch: int | None = None,
) -> Interval:
    """Scenario-cluster percentile bootstrap (§6.5).

    Clusters (scenarios) are resampled with replacement and every row (every seed) of a
    sampled cluster is retained; the statistic is the mean over all retained rows, i.e.
    (sum of cluster sums) / (sum of cluster row counts).  ``values`` are per-row values
    (typically paired deltas) and ``clusters`` one hashable label per row.  ``batch``
    bounds memory: at most ``batch * n_clusters`` indices exist at once.
    """
    checked = _validate(
        {"values": values},
        labels=clusters,
        confidence=confidence,
        n_resamples=n_resamples,
        batch=batch,
        seed=seed,
    )
    (x,), codes, rng = checked
    assert codes is not None and rng is not None
    n_clusters = int(codes.max()) + 1
    sums = np.bincount(codes, weights=x, minlength=n_clusters)
    counts = np.bincount(codes, minlength=n_clusters).astype(np.float64)
    samples, _ = bootstrap_distribution(sums, counts, n_resamples, rng, batch)
    low, high = percentile_interval(samples, confidence)
    return Interval(
        estimate=float(x.mean()),
        low=low,
        high=high,
        n=x.size,
        n_clusters=n_clusters,
        confidence=float(confidence),
        n_resamples=int(n_resamples),
        method="cluster-percentile",
    )


def zero_event_bounds(n: int) -> dict[str, float]:
    """One-sided upper bounds on an event rate after 0 events in ``n`` trials (§7.2).

    ``exact_binomial_95`` solves (1 - p)**n = 0.05 (Clopper-Pearson, one-sided 95%);
    ``rule_of_three`` is its familiar approximation 3/n.  For the cluster bound of §7.2,
    ``n`` is the number of scenario clusters (3/504 ~ 0.60%, 3/192 ~ 1.56%).
    ``n == 0`` (no trials) gives NaN for both.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ValueError(f"zero_event_bounds: n must be an integer, got {n!r}")
    if n < 0:
        raise ValueError(f"zero_event_bounds: n must be >= 0, got {n}")
    if n == 0:
        return {"exact_binomial_95": math.nan, "rule_of_three": math.nan}
    return {"exact_binomial_95": 1 - 0.05 ** (1 / n), "rule_of_three": 3 / n}


def win_rate(a: ArrayLike, b: ArrayLike, higher_is_better: bool) -> float:
    """Paired win rate (§6.5): the share of pairs where B is strictly better than A."""
    checked = _validate({"a": a, "b": b})
    xa, xb = checked.arrays
    wins = xb > xa if higher_is_better else xb < xa
    return float(np.count_nonzero(wins) / xa.size)


def percentile_interval(stat_samples: ArrayLike, confidence: float) -> tuple[float, float]:
    """Equal-tailed percentile interval of bootstrap samples.

    The ``alpha = (1 - confidence) / 2`` and ``1 - alpha`` sample quantiles, Hyndman-Fan
    type 7 ("linear") evaluated with the same floating-point formula as
    ``scipy.stats.quantile``, which ``scipy.stats.bootstrap(method="percentile")`` uses, so
    equal samples give bit-equal bounds.  The only departure: when both neighbouring order
    statistics are equal, that value is returned without interpolation rounding.
    """
    checked = _validate({"stat_samples": stat_samples}, confidence=confidence)
    x = checked.arrays[0]
    n = x.size
    alpha = (1 - confidence) / 2
    p = np.array([alpha, 1 - alpha])
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = np.where(j < 0, 0.0, jg % 1)
    j = np.clip(j, 0, n - 1).astype(np.intp)
    jp1 = np.clip(jp1, 0, n - 1).astype(np.intp)
    y = np.partition(x, np.unique(np.concatenate([j, jp1])))
    below, above = y[j], y[jp1]
    q = np.where(below == above, below, (1 - g) * below + g * above)
    return float(q[0]), float(q[1])


# --------------------------------------------------------------------------- validation


class _Checked(NamedTuple):
    arrays: list[np.ndarray]
    codes: np.ndarray | None
    rng: np.random.Generator | None


_UNSET: Any = object()


def _validate(
    arrays: dict[str, ArrayLike],
    *,
    labels: Iterable[Hashable] | None = None,
    confidence: float | None = None,
    n_resamples: int | None = None,
    batch: int | None = None,
    seed: SeedLike = _UNSET,
) -> _Checked:
    """All input checks: 1-D finite float arrays of one length n >= 1, optional cluster
    labels of that length, 0 < confidence < 1, n_resamples >= 1, batch None or >= 1, and
    a seed (required: None would draw fresh OS entropy and break reproducibility)."""
    out: list[np.ndarray] = []
    for name, raw in arrays.items():
        try:
            x = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be numeric: {exc}") from exc
        if x.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
        if x.size == 0:
            raise ValueError(f"{name} must contain at least one value")
        if not np.all(np.isfinite(x)):
            bad = int(np.count_nonzero(~np.isfinite(x)))
            raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN, inf or null)")
        if out and x.size != out[0].size:
            first = next(iter(arrays))
            raise ValueError(f"{name} has length {x.size} but {first} has length {out[0].size}")
        out.append(x)
    codes = None
    if labels is not None:
        codes = _factorize(labels)
        if out and codes.size != out[0].size:
            raise ValueError(
                f"clusters has length {codes.size} but values has length {out[0].size}"
            )
    if confidence is not None and not (
        isinstance(confidence, float | int | np.floating) and 0 < confidence < 1
    ):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    for name, count in (("n_resamples", n_resamples), ("batch", batch)):
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {count!r}")
    rng = None
    if seed is not _UNSET:
        if seed is None:
            raise ValueError("seed is required (an int, a sequence of ints or a SeedSequence)")
        try:
            rng = _generator(seed)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid seed {seed!r}: {exc}") from exc
    return _Checked(out, codes, rng)


def cluster_codes(labels: Iterable[Hashable]) -> np.ndarray:
    """Integer codes 0..G-1 for the labels, numbered in order of first appearance (what
    :func:`cluster_bootstrap` resamples; passing these codes instead of the labels gives
    the same interval, and a worker process receives a small integer array)."""
    return _factorize(labels)


def _factorize(labels: Iterable[Hashable]) -> np.ndarray:
    """Integer codes 0..G-1 for the labels, numbered in order of first appearance."""
    if type(labels).__module__.startswith("polars") and hasattr(labels, "null_count") \
            and labels.null_count() == 0 and labels.dtype.is_(_pl_string()):
        # a polars string Series (cluster ids): hash in bulk instead of a Python loop over
        # up to 10^6 labels; the codes are the same first-appearance numbering
        first = labels.unique(maintain_order=True)
        codes = labels.replace_strict(first, np.arange(first.len(), dtype=np.int64),
                                      return_dtype=_pl_int64())
        return codes.to_numpy().astype(np.intp, copy=False)
    if hasattr(labels, "to_numpy") and not isinstance(labels, np.ndarray):
        labels = labels.to_numpy()  # polars / pandas Series
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "biufUSMm":
        if labels.ndim != 1:
            raise ValueError(f"clusters must be 1-D, got shape {labels.shape}")
        if labels.dtype.kind == "f" and np.isnan(labels).any():
            raise ValueError("clusters contains NaN labels")
        _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
        rank = np.empty(first.size, dtype=np.intp)
        rank[np.argsort(first, kind="stable")] = np.arange(first.size)
        return rank[inverse.reshape(-1)]
    seen: dict[Any, int] = {}
    try:
        codes = [seen.setdefault(label, len(seen)) for label in labels]
    except TypeError as exc:
        raise ValueError(f"cluster labels must be hashable: {exc}") from exc
    return np.asarray(codes, dtype=np.intp)


def _pl_string() -> Any:
    import polars as pl  # only reached with a polars Series in hand

    return pl.String


def _pl_int64() -> Any:
    import polars as pl

    return pl.Int64


def _generator(seed: SeedLike) -> np.random.Generator:
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return np.random.Generator(np.random.PCG64(seq))
