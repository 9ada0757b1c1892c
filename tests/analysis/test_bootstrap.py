"""Tests for the paired and scenario-cluster bootstrap (paper §6.5, eq. 12; §7.2).

Values are pinned against `scipy.stats.bootstrap` (exactly, for the kernel that draws the
same indices; within Monte Carlo error otherwise), against brute-force enumeration of all
resamples, and against the known moments of the bootstrap distribution.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import FrozenInstanceError

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from containmentbench.analysis.bootstrap import (
    Interval,
    cluster_bootstrap,
    pair_bootstrap,
    percentile_interval,
    win_rate,
    zero_event_bounds,
)
from containmentbench.analysis.resample import _atoms, _lattice_cdf, bootstrap_distribution

# -------------------------------------------------------------------- shared data


def _binary_deltas(n: int, pa: float, pb: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(n) < pb).astype(float) - (rng.random(n) < pa)


def _clustered(n_clusters: int, seeds: int, kind: str, seed: int):
    """Study-shaped rows: n_clusters scenarios x seeds rollouts, per-row paired deltas."""
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(n_clusters), seeds)
    if kind == "binary":
        p = rng.beta(2, 2, n_clusters)[clusters]
        values = (rng.random(clusters.size) < p).astype(float) - (rng.random(clusters.size) < 0.5)
    elif kind == "continuous":
        values = rng.normal(0.1, 1.0, n_clusters)[clusters] + rng.normal(size=clusters.size)
    else:  # "tied": most pairs identical (delta 0), the rest continuous, as logged spread
        moved = rng.random(clusters.size) < 0.1
        values = np.where(moved, rng.normal(-0.05, 0.2, clusters.size), 0.0)
    return values, clusters


def _cluster_arrays(values, clusters):
    sums = np.bincount(clusters, weights=values)
    counts = np.bincount(clusters).astype(float)
    return sums, counts


def _ratio(s, c, axis=-1):
    return s.sum(axis=axis) / c.sum(axis=axis)


def _scipy_mc_tolerance(boot: np.ndarray, q: float, n_resamples: int, step: float) -> float:
    """4 standard errors of the difference of two independent q-quantile estimates.

    sd(q-quantile) ~ sqrt(q (1 - q) / B) / f(x_q), with the density from the bootstrap
    distribution's quantiles; `step` allows one lattice step for discrete statistics.
    """
    h = 0.01
    lo, hi = np.quantile(boot, [q - h, q + h])
    sd = math.sqrt(q * (1 - q) / n_resamples) * (hi - lo) / (2 * h)
    return 4 * math.sqrt(2) * sd + step


# -------------------------------------------------------------------- zero-event bounds


@pytest.mark.parametrize("n", [1, 2, 5, 96, 192, 480, 504, 960, 2520])
def test_zero_event_bounds_are_the_exact_formulas(n):
    bounds = zero_event_bounds(n)
    assert bounds["exact_binomial_95"] == 1 - 0.05 ** (1 / n)
    assert bounds["rule_of_three"] == 3 / n


def test_zero_event_bounds_reproduce_section_7_2():
    # §7.2: 504 scenario clusters -> ~0.60%; 192 security clusters -> ~1.56%.
    assert round(100 * zero_event_bounds(504)["rule_of_three"], 2) == 0.60
    assert round(100 * zero_event_bounds(192)["rule_of_three"], 2) == 1.56
    # The exact one-sided bound solves (1 - p)^n = 0.05 and sits just below 3/n.
    exact = zero_event_bounds(504)["exact_binomial_95"]
    assert (1 - exact) ** 504 == pytest.approx(0.05, rel=1e-12)
    assert exact < 3 / 504


def test_zero_event_bounds_without_trials_are_nan():
    assert all(math.isnan(v) for v in zero_event_bounds(0).values())


@pytest.mark.parametrize("bad", [-1, 2.0, True, "5", None])
def test_zero_event_bounds_reject_bad_n(bad):
    with pytest.raises(ValueError, match="n must be"):
        zero_event_bounds(bad)


# -------------------------------------------------------------------- exact pins to scipy


def test_index_kernel_reproduces_scipy_pair_bootstrap_exactly():
    x = np.random.default_rng(3).normal(size=73)
    ours, kernel = bootstrap_distribution(
        x, None, 3000, np.random.default_rng(11), None, kernel="index"
    )
    ref = stats.bootstrap(
        (x,), np.mean, n_resamples=3000, method="percentile", rng=np.random.default_rng(11)
    )
    assert kernel == "index"
    np.testing.assert_array_equal(ours, ref.bootstrap_distribution)
    assert percentile_interval(ours, 0.95) == tuple(ref.confidence_interval)


def test_index_kernel_reproduces_scipy_cluster_bootstrap_exactly():
    # Unbalanced clusters: the ratio statistic needs the resampled counts too.
    rng = np.random.default_rng(4)
    clusters = rng.integers(0, 40, 200)
    values = rng.normal(size=200)
    sums, counts = _cluster_arrays(values, np.unique(clusters, return_inverse=True)[1])
    ours, _ = bootstrap_distribution(
        sums, counts, 2500, np.random.default_rng(5), 64, kernel="index"
    )
    ref = stats.bootstrap(
        (sums, counts),
        _ratio,
        paired=True,
        vectorized=True,
        n_resamples=2500,
        method="percentile",
        rng=np.random.default_rng(5),
    )
    np.testing.assert_array_equal(ours, ref.bootstrap_distribution)


# -------------------------------------------------------------------- scipy within MC error

CASES = {
    "pair-binary": (lambda: (_binary_deltas(600, 0.16, 0.86, 1), None)),
    "pair-continuous": (lambda: (np.random.default_rng(2).normal(0.05, 1, 480), None)),
    "cluster-binary": (lambda: _clustered(120, 5, "binary", 3)),
    "cluster-continuous": (lambda: _clustered(96, 5, "continuous", 4)),
    "cluster-tied": (lambda: _clustered(192, 5, "tied", 5)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_public_intervals_agree_with_scipy_within_monte_carlo_error(case):
    values, clusters = CASES[case]()
    b = 10_000
    if clusters is None:
        ours = pair_bootstrap(values, n_resamples=b, seed=20)
        ref = stats.bootstrap(
            (values,), np.mean, n_resamples=b, method="percentile", rng=np.random.default_rng(21)
        )
        step = 1 / values.size
    else:
        ours = cluster_bootstrap(values, clusters, n_resamples=b, seed=20)
        sums, counts = _cluster_arrays(values, clusters)
        ref = stats.bootstrap(
            (sums, counts),
            _ratio,
            paired=True,
            vectorized=True,
            n_resamples=b,
            method="percentile",
            rng=np.random.default_rng(21),
        )
        step = 1 / values.size
    boot = ref.bootstrap_distribution
    assert ours.estimate == pytest.approx(values.mean(), abs=1e-15)
    assert abs(ours.low - ref.confidence_interval.low) < _scipy_mc_tolerance(boot, 0.025, b, step)
    assert abs(ours.high - ref.confidence_interval.high) < _scipy_mc_tolerance(boot, 0.975, b, step)


# -------------------------------------------------------------------- kernel equivalence


def _kernel_runs(sums, counts, n_resamples, seed):
    runs = {
        "index": dict(kernel="index"),
        "multinomial-pure": dict(kernel="multinomial", heavy_min=1),
        "multinomial-mixed": dict(kernel="multinomial", heavy_min=4),
        "pairtable": dict(kernel="multinomial", heavy_min=10**9),
    }
    balanced = counts is None or counts.min() == counts.max()
    if balanced and np.array_equal(sums, np.rint(sums)):
        runs["lattice"] = dict(kernel="lattice")
    out = {}
    for i, (name, kw) in enumerate(runs.items()):
        rng = np.random.default_rng([seed, i])
        out[name] = bootstrap_distribution(sums, counts, n_resamples, rng, None, **kw)[0]
    return out


@pytest.mark.parametrize("kind", ["binary", "continuous", "tied"])
def test_all_kernels_draw_the_same_distribution(kind):
    # Resampling n units from k atoms is a Multinomial(n, m/n) draw over the atoms; the
    # kernels must be statistically indistinguishable from plain index resampling.
    # binary: integer sums with repeats (lattice, heavy and light atoms); continuous: all
    # sums distinct; tied: one heavy zero atom plus distinct light ones.
    values, clusters = _clustered(60, 5, kind, 7)
    sums, counts = _cluster_arrays(values, clusters)
    b = 20_000
    draws = _kernel_runs(sums, counts, b, 8)
    # Exact moments of the bootstrap distribution of a mean of G i.i.d. unit draws with
    # equal counts: mean = sum(s)/sum(c), var = var(s / c) / G.
    mean = sums.sum() / counts.sum()
    sd = np.std(sums / counts[0]) / math.sqrt(sums.size)
    ref = draws["index"]
    for name, d in draws.items():
        assert abs(d.mean() - mean) < 5 * sd / math.sqrt(b), name
        assert d.std() == pytest.approx(sd, rel=0.05), name
        np.testing.assert_allclose(
            np.quantile(d, [0.025, 0.5, 0.975]),
            np.quantile(ref, [0.025, 0.5, 0.975]),
            atol=8 * sd / math.sqrt(b) * 4 + 1 / values.size,
        )
        if name != "index":
            assert stats.ks_2samp(ref, d).pvalue > 0.001, name


def test_multinomial_shortcut_matches_index_resampling_on_binary_pairs():
    # The headline use: k = 3 distinct deltas {-1, 0, 1} among 2520 pairs.
    x = _binary_deltas(2520, 0.55, 0.52, 9)
    d_index = bootstrap_distribution(x, None, 20_000, np.random.default_rng(1), None, "index")[0]
    d_multi = bootstrap_distribution(
        x, None, 20_000, np.random.default_rng(2), None, "multinomial", heavy_min=1
    )[0]
    d_lattice = bootstrap_distribution(x, None, 20_000, np.random.default_rng(3), None, "lattice")[
        0
    ]
    for other in (d_multi, d_lattice):
        assert stats.ks_2samp(d_index, other).pvalue > 0.001
        assert other.std() == pytest.approx(d_index.std(), rel=0.03)
        assert other.mean() == pytest.approx(d_index.mean(), abs=4 * x.std() / 2520)


def test_lattice_pmf_equals_brute_force_enumeration():
    # All 6^6 index tuples of a 6-unit cluster bootstrap, integer sums, equal counts.
    sums = np.array([0.0, 2.0, 2.0, 5.0, -1.0, 2.0])
    counts = np.full(6, 3.0)
    exact: dict[float, float] = {}
    for idx in itertools.product(range(6), repeat=6):
        total = sums[list(idx)].sum()
        exact[total] = exact.get(total, 0.0) + 6.0**-6
    atoms = _atoms(sums, counts)
    cdf, first = _lattice_cdf(atoms, 6, 1)
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    support = first + np.arange(pmf.size)
    got = {float(s): float(p) for s, p in zip(support, pmf) if p > 0}
    assert got.keys() == exact.keys()
    for total, p in exact.items():
        assert got[total] == pytest.approx(p, rel=1e-12, abs=1e-15)


def test_lattice_pmf_of_a_rare_event_is_binomial():
    # One event among 2520 pairs: the resampled event count is Binomial(2520, 1/2520);
    # the far tail underflows and is flushed, which must not disturb the bulk.
    x = np.zeros(2520)
    x[7] = -1.0
    cdf, first = _lattice_cdf(_atoms(x, np.ones(2520)), 2520, 1)
    pmf = np.diff(np.concatenate([[0.0], cdf]))
    events = -(first + np.arange(pmf.size))  # lattice runs from -k_max to 0
    expected = stats.binom.pmf(events, 2520, 1 / 2520)
    # Relative accuracy in the bulk; the flushed mass (< 1e-140) only shows in the far tail.
    np.testing.assert_allclose(pmf, expected, rtol=1e-10, atol=1e-140)
    assert events.min() == 0 and 20 < events.max() < 2520  # tail trimmed, bulk kept


def test_lattice_uses_the_gcd_step():
    sums = np.array([0.0, 4.0, 8.0, 8.0])  # even lattice, step 4
    cdf, first = _lattice_cdf(_atoms(sums, np.ones(4)), 4, 4)
    assert first == 0.0
    assert cdf.size == 9  # sums 0, 4, ..., 32


def _default_kernel(sums, counts=None):
    return bootstrap_distribution(sums, counts, 10_000, np.random.default_rng(0), None)[1]


def test_default_kernel_choice_uses_the_fast_paths():
    # Binary deltas: three atoms, so no index resampling.
    assert _default_kernel(_binary_deltas(2520, 0.5, 0.5, 1)) in {"lattice", "multinomial"}
    # Binary cluster sums in -5..5 over 504 clusters: the exact lattice distribution.
    assert _default_kernel(*_cluster_arrays(*_clustered(504, 5, "binary", 2))) == "lattice"
    # Continuous or mostly tied: multinomial (pooled picks through the pair table).
    assert _default_kernel(*_cluster_arrays(*_clustered(504, 5, "continuous", 2))) == (
        "multinomial"
    )
    assert _default_kernel(*_cluster_arrays(*_clustered(192, 5, "tied", 2))) == "multinomial"
    assert _default_kernel(np.zeros(50)) == "constant"
    # Too many units for the pair table and no repeated values: plain resampling.
    assert _default_kernel(np.random.default_rng(0).normal(size=2520)) == "index"


# -------------------------------------------------------------------- coverage


def test_pair_bootstrap_covers_a_known_bernoulli_difference():
    # Pairs (A, B) with A ~ Bernoulli(0.3), B ~ Bernoulli(0.45): the true delta is 0.15.
    reps, n = 400, 200
    rng = np.random.default_rng(2024)
    covered = 0
    for r in range(reps):
        a = rng.random(n) < 0.3
        b = rng.random(n) < 0.45
        iv = pair_bootstrap(b.astype(float) - a, n_resamples=2000, seed=r)
        covered += iv.low <= 0.15 <= iv.high
    # Percentile intervals run slightly below nominal; binomial sd of the rate is 0.011.
    assert 0.91 <= covered / reps <= 0.985


def test_cluster_bootstrap_covers_the_mean_under_within_cluster_correlation():
    # Scenario effects p_s ~ Beta(2, 3) (mean 0.4), 5 correlated seeds per scenario.
    reps, g = 300, 60
    rng = np.random.default_rng(7)
    covered = 0
    for r in range(reps):
        p = rng.beta(2, 3, g)
        values = (rng.random((g, 5)) < p[:, None]).astype(float).ravel()
        iv = cluster_bootstrap(values, np.repeat(np.arange(g), 5), n_resamples=2000, seed=r)
        covered += iv.low <= 0.4 <= iv.high
    assert 0.89 <= covered / reps <= 0.99


# -------------------------------------------------------------------- determinism, batching


def test_same_seed_gives_identical_intervals():
    values, clusters = _clustered(120, 5, "tied", 1)
    assert pair_bootstrap(values, seed=5) == pair_bootstrap(values, seed=5)
    assert cluster_bootstrap(values, clusters, seed=5) == cluster_bootstrap(
        values, clusters, seed=5
    )
    assert pair_bootstrap(values, seed=5) != pair_bootstrap(values, seed=6)


def test_seed_sequence_is_accepted_and_not_consumed():
    seq = np.random.SeedSequence(99)
    x = np.random.default_rng(0).normal(size=300)
    first = pair_bootstrap(x, seed=seq, n_resamples=500)
    assert pair_bootstrap(x, seed=seq, n_resamples=500) == first
    assert pair_bootstrap(x, seed=99, n_resamples=500) == first


@pytest.mark.parametrize("kind", ["binary", "continuous", "tied"])
def test_batching_never_changes_the_result(kind):
    values, clusters = _clustered(41, 5, kind, 3)
    values[:7] += 0.25  # unbalanced-looking sums; counts stay balanced
    clusters = clusters.copy()
    clusters[-3:] = 0  # unbalanced counts: cluster 0 has 8 rows, cluster 40 has 2
    sums, counts = _cluster_arrays(values, clusters)
    for kernel, heavy_min in [
        ("index", 1),
        ("multinomial", 1),
        ("multinomial", 3),
        ("multinomial", 10**9),
    ]:
        ref = bootstrap_distribution(
            sums, counts, 701, np.random.default_rng(1), None, kernel, heavy_min
        )[0]
        for batch in (1, 2, 7, 700, 10_000):
            got = bootstrap_distribution(
                sums, counts, 701, np.random.default_rng(1), batch, kernel, heavy_min
            )[0]
            np.testing.assert_array_equal(got, ref, err_msg=f"{kernel} {heavy_min} {batch}")


def test_batching_never_changes_the_lattice_result():
    x = _binary_deltas(333, 0.3, 0.6, 2)
    ref = bootstrap_distribution(x, None, 999, np.random.default_rng(3), None, "lattice")[0]
    for batch in (1, 10, 998):
        got = bootstrap_distribution(x, None, 999, np.random.default_rng(3), batch, "lattice")
        np.testing.assert_array_equal(got[0], ref)


def test_public_functions_are_batch_invariant():
    values, clusters = _clustered(50, 5, "tied", 8)
    for batch in (1, 13):
        assert pair_bootstrap(values, seed=1, n_resamples=400, batch=batch) == pair_bootstrap(
            values, seed=1, n_resamples=400
        )
        assert cluster_bootstrap(
            values, clusters, seed=1, n_resamples=400, batch=batch
        ) == cluster_bootstrap(values, clusters, seed=1, n_resamples=400)


class _RecordingGenerator:
    """Wraps a Generator and records the size of every array of draws it returns."""

    def __init__(self, rng: np.random.Generator, sizes: list[int]) -> None:
        self._rng = rng
        self.bit_generator = rng.bit_generator
        self.sizes = sizes

    def __getattr__(self, name):
        method = getattr(self._rng, name)

        def record(*args, **kwargs):
            out = method(*args, **kwargs)
            self.sizes.append(np.size(out))
            return out

        return record


@pytest.mark.parametrize(
    ("kernel", "heavy_min"), [("index", 1), ("multinomial", 1), ("multinomial", 10**9)]
)
def test_batch_bounds_the_number_of_indices_in_memory(monkeypatch, kernel, heavy_min):
    sizes: list[int] = []
    real = np.random.Generator
    # Also records the second stream the multinomial kernel derives for light units.
    monkeypatch.setattr(
        np.random, "Generator", lambda bitgen: _RecordingGenerator(real(bitgen), sizes)
    )
    x = np.random.default_rng(0).normal(size=500)
    rng = _RecordingGenerator(real(np.random.PCG64(1)), sizes)
    bootstrap_distribution(x, None, 1000, rng, 9, kernel, heavy_min)
    assert len(sizes) > 100  # 1000 resamples in blocks of <= 9
    assert max(sizes) <= 9 * x.size


# -------------------------------------------------------------------- hand-computed cases


@pytest.mark.parametrize("value", [0.0, 0.1, -1.0, 1 / 3])
def test_all_equal_values_give_a_zero_width_interval(value):
    iv = pair_bootstrap(np.full(480, value), seed=0)
    assert iv.low == iv.high == value
    assert iv.tie == (value == 0.0)  # Table 25: "Clean utility ... 0 [0, 0]" is a tie
    civ = cluster_bootstrap(np.full(480, value), np.repeat(np.arange(96), 5), seed=0)
    assert civ.low == civ.high == value
    assert civ.n_clusters == 96


def test_single_pair():
    iv = pair_bootstrap([0.25], seed=1, n_resamples=10)
    assert (iv.estimate, iv.low, iv.high, iv.n) == (0.25, 0.25, 0.25, 1)


def test_two_values_resample_to_the_three_possible_means():
    # Means of two draws from {0, 1}: 0, 1/2, 1 with probabilities 1/4, 1/2, 1/4.
    for kernel in ("index", "multinomial", "lattice"):
        d = bootstrap_distribution(
            np.array([0.0, 1.0]), None, 40_000, np.random.default_rng(0), None, kernel, 1
        )[0]
        values, freq = np.unique(d, return_counts=True)
        assert values.tolist() == [0.0, 0.5, 1.0]
        np.testing.assert_allclose(freq / d.size, [0.25, 0.5, 0.25], atol=0.01)
    iv = pair_bootstrap([0.0, 1.0], seed=0)
    assert (iv.low, iv.high) == (0.0, 1.0)


def test_cluster_statistic_is_the_mean_over_retained_rows():
    # Cluster a = rows (1, 1, 1), cluster b = row (0): resampled means are
    # aa -> 1, ab/ba -> 3/4 (not the mean of cluster means, 1/2), bb -> 0.
    values = [1.0, 1.0, 1.0, 0.0]
    labels = ["a", "a", "a", "b"]
    iv = cluster_bootstrap(values, labels, seed=0)
    assert iv.estimate == 0.75
    assert (iv.low, iv.high) == (0.0, 1.0)
    sums, counts = np.array([3.0, 0.0]), np.array([3.0, 1.0])
    for kernel in ("index", "multinomial"):
        d = bootstrap_distribution(
            sums, counts, 40_000, np.random.default_rng(1), None, kernel, 1
        )[0]
        values_, freq = np.unique(d, return_counts=True)
        assert values_.tolist() == [0.0, 0.75, 1.0]
        np.testing.assert_allclose(freq / d.size, [0.25, 0.5, 0.25], atol=0.01)


@pytest.mark.parametrize("kind", ["binary", "continuous", "tied"])
def test_one_row_per_cluster_equals_the_pair_bootstrap(kind):
    values, _ = _clustered(100, 5, kind, 6)
    pair = pair_bootstrap(values, seed=3, n_resamples=2000)
    cluster = cluster_bootstrap(values, np.arange(values.size), seed=3, n_resamples=2000)
    assert (cluster.estimate, cluster.low, cluster.high) == (pair.estimate, pair.low, pair.high)
    assert cluster.n_clusters == cluster.n == pair.n
    # With shuffled labels the units are reordered: same distribution, other draws.
    labels = np.random.default_rng(0).permutation(values.size).astype(str)
    shuffled = bootstrap_distribution(
        *_cluster_arrays(values, np.unique(labels, return_inverse=True)[1]),
        20_000,
        np.random.default_rng(4),
        None,
    )[0]
    plain = bootstrap_distribution(values, None, 20_000, np.random.default_rng(5), None)[0]
    assert stats.ks_2samp(shuffled, plain).pvalue > 0.001


def test_cluster_labels_of_any_hashable_type_give_the_same_interval():
    values, clusters = _clustered(30, 5, "continuous", 2)
    ref = cluster_bootstrap(values, clusters, seed=1, n_resamples=500)
    as_tuples = [(f"scenario-{c}", "model-x") for c in clusters]
    as_strings = np.array([f"s{c:03d}" for c in clusters])
    as_series = pl.Series([f"s{c}" for c in clusters])
    for labels in (as_tuples, as_strings, as_series, list(clusters), clusters + 1000):
        assert cluster_bootstrap(values, labels, seed=1, n_resamples=500) == ref


def test_cluster_bootstrap_matches_table_12_shape_on_synthetic_study_data():
    # 120 scenarios x 5 seeds, v1 completes 16%, v2 86% of authorized actions (Table 12).
    rng = np.random.default_rng(12)
    clusters = np.repeat(np.arange(120), 5)
    v1 = rng.random(600) < 0.16
    v2 = rng.random(600) < 0.86
    iv = cluster_bootstrap(v2.astype(float) - v1, clusters, seed=0)
    assert iv.method == "cluster-percentile" and iv.n == 600 and iv.n_clusters == 120
    assert iv.low < iv.estimate < iv.high and not iv.tie
    assert 0.05 < iv.high - iv.low < 0.2


# -------------------------------------------------------------------- win rate, percentiles


def test_win_rate_counts_strict_wins_of_b():
    a = [0, 1, 1, 0, 1]
    b = [1, 1, 0, 0, 0]
    assert win_rate(a, b, higher_is_better=True) == 0.2
    assert win_rate(a, b, higher_is_better=False) == 0.4


def test_win_rate_table_25_committed_violation():
    # None vs tool-boundary: tool-boundary (B) wins exactly where None had a violation.
    a = np.zeros(2520)
    a[:367] = 1
    assert win_rate(a, np.zeros(2520), higher_is_better=False) == pytest.approx(0.1456, abs=5e-5)


@pytest.mark.parametrize("size", [1, 2, 39, 1001, 10_000])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_percentile_interval_matches_scipy_quantile_bit_for_bit(size, confidence):
    samples = np.random.default_rng(size).normal(size=size)
    alpha = (1 - confidence) / 2
    expected = stats.quantile(samples, np.asarray([alpha, 1 - alpha]))
    assert percentile_interval(samples, confidence) == tuple(expected)
    np.testing.assert_allclose(
        percentile_interval(samples, confidence),
        np.quantile(samples, [alpha, 1 - alpha]),
        rtol=1e-14,
        atol=1e-15,
    )


def test_percentile_interval_hand_values():
    assert percentile_interval(np.arange(101.0), 0.9) == pytest.approx((5.0, 95.0), abs=1e-12)
    assert percentile_interval([0.1] * 10_000, 0.95) == (0.1, 0.1)  # no rounding drift


# -------------------------------------------------------------------- Interval


def test_interval_crosses_zero_and_tie():
    def make(low, high):
        return Interval(0.0, low, high, 10, None, 0.95, 100, "pair-percentile")

    assert make(-0.1, 0.2).crosses_zero and make(-0.1, 0.2).tie
    assert make(0.0, 0.0).tie and make(-0.3, 0.0).tie
    assert not make(0.01, 0.2).crosses_zero and not make(-0.2, -0.01).tie
    with pytest.raises(FrozenInstanceError):
        make(0, 1).low = 3  # type: ignore[misc]


def test_interval_fields():
    iv = pair_bootstrap([1.0, 0.0, 0.0, 1.0], seed=0, n_resamples=50, confidence=0.9)
    assert (iv.n, iv.n_clusters, iv.confidence, iv.n_resamples, iv.method) == (
        4,
        None,
        0.9,
        50,
        "pair-percentile",
    )


# -------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(deltas=[[1.0, 2.0]]), "must be 1-D"),
        (dict(deltas=[]), "at least one value"),
        (dict(deltas=[1.0, np.nan]), "non-finite"),
        (dict(deltas=[1.0, np.inf]), "non-finite"),
        (dict(deltas=["a", "b"]), "must be numeric"),
        (dict(deltas=[1.0, None]), "non-finite"),
        (dict(deltas=[1.0], confidence=1.0), "confidence must be in"),
        (dict(deltas=[1.0], confidence=0), "confidence must be in"),
        (dict(deltas=[1.0], confidence=True), "confidence must be in"),
        (dict(deltas=[1.0], n_resamples=0), "n_resamples must be an integer >= 1"),
        (dict(deltas=[1.0], n_resamples=10.0), "n_resamples must be an integer >= 1"),
        (dict(deltas=[1.0], batch=0), "batch must be an integer >= 1"),
        (dict(deltas=[1.0], seed=None), "seed is required"),
        (dict(deltas=[1.0], seed=-3), "invalid seed"),
        (dict(deltas=[1.0], seed="x"), "invalid seed"),
    ],
)
def test_pair_bootstrap_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pair_bootstrap(**{"seed": 0, **kwargs})


@pytest.mark.parametrize(
    ("values", "clusters", "match"),
    [
        ([1.0, 2.0], [0], "clusters has length 1 but values has length 2"),
        ([1.0, 2.0], [[0], [1]], "hashable"),
        ([1.0, 2.0], np.array([0.0, np.nan]), "NaN labels"),
        ([1.0, 2.0], np.zeros((2, 1)), "clusters must be 1-D"),
    ],
)
def test_cluster_bootstrap_rejects_bad_input(values, clusters, match):
    with pytest.raises(ValueError, match=match):
        cluster_bootstrap(values, clusters, seed=0)


def test_win_rate_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="b has length 2 but a has length 3"):
        win_rate([1, 2, 3], [1, 2], higher_is_better=True)


def test_percentile_interval_rejects_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        percentile_interval([1.0, 2.0], 1.5)


# -------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(
        st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 2)), min_size=1, max_size=40
    ),
    n_clusters=st.integers(1, 12),
    batch=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
)
def test_interval_properties(values, n_clusters, batch, seed):
    x = np.array(values)
    labels = np.arange(x.size) % n_clusters
    iv = cluster_bootstrap(x, labels, n_resamples=300, seed=seed)
    # Every resampled statistic is a weighted mean of rows.
    assert x.min() - 1e-9 <= iv.low <= iv.high <= x.max() + 1e-9
    assert iv == cluster_bootstrap(x, labels, n_resamples=300, seed=seed, batch=batch)
    piv = pair_bootstrap(x, n_resamples=300, seed=seed)
    assert x.min() - 1e-9 <= piv.low <= piv.high <= x.max() + 1e-9
