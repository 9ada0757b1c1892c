"""The resampling engine of the bootstrap intervals (``bootstrap.py``):
``bootstrap_distribution`` draws ``n_resamples`` values of the statistic

    theta* = sum_j w_j s_j / sum_j w_j c_j,        w ~ Multinomial(G, (1/G, ..., 1/G)),

where unit ``j`` (a pair, or a scenario cluster) has sum ``s_j`` and row count ``c_j``.

Exact kernels draw theta*; which one runs depends only on the data and ``n_resamples``
(a cost model), never on ``batch``:

``index``
    Plain resampling: G uniform unit indices per resample, drawn exactly as
    ``scipy.stats.bootstrap`` draws them, so with the same generator the two bootstrap
    distributions coincide.
``multinomial``
    Resampling G units with replacement from k distinct (s, c) atoms with multiplicities
    m_1..m_k has the same distribution as drawing the atom counts from
    Multinomial(G, m/G): one k-vector per resample instead of G indices (numpy draws it
    by conditional binomials from the float probabilities m/G).  Atoms shared by
    few units ("light") are pooled into one category whose K picks are uniform over the
    light units and are drawn as unit indices, two at a time: a uniform integer u on
    [0, L^2) is the pair (u // L, u % L) of independent uniform picks among L units, so
    one draw and one gather from a table of pair sums replace two of each.  With no heavy
    atom this is plain resampling at half the draws.
``lattice``
    When the atoms are integers with one common count (binary metrics, their paired
    deltas, event counts), sum_j w_j s_j lives on an integer lattice and its exact
    bootstrap distribution is the G-fold convolution of the atom distribution.  It is
    computed once (binary exponentiation with ``np.convolve``) and theta* is drawn by
    inverse-CDF sampling.  Probabilities below ``_TINY`` (1e-150) are flushed to zero to
    avoid slow subnormal arithmetic; inverse-CDF sampling with 53-bit uniforms cannot
    resolve mass below 2**-53 anyway, so the draws keep the exact distribution to double
    precision (as numpy's own multinomial does with float probabilities).
``constant``
    All units identical: every resample has the same statistic.

Every kernel consumes its random streams resample by resample, so processing the
resamples in batches of any size gives bit-identical results for the same seed (``batch``
is only a memory bound).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

# `batch` default: at most this many resampled elements (indices) in memory at once.
_MAX_BATCH_ELEMENTS = 1 << 24
# Working blocks are kept cache-sized (the result does not depend on the block size).
_BLOCK_ELEMENTS = 1 << 17
# Probabilities below this are flushed to zero in the lattice kernel (see module docstring).
_TINY = 1e-150
# Rough per-operation costs in nanoseconds (measured on a 2-core x86 VM); they only pick
# the fastest exact kernel and never change the distribution.
_NS_PER_INDEX = 4.0  # draw one uniform unit index, gather, add
_NS_PER_PAIRED_PICK = 2.5  # one unit through the pair table (half a draw and a gather)
_NS_PER_RAGGED_PICK = 5.0  # the same when rows have unequal pick counts (bincount sums)
_NS_PER_RAGGED_INDEX = 5.5  # a ragged pick without the pair table
_NS_PER_ROW = 70.0  # numpy multinomial per resample, including its first binomial
_NS_PER_BINOMIAL = 80.0  # each further conditional binomial
_NS_PER_CONV_OP = 0.15  # one multiply-add in np.convolve
_NS_PER_SEARCH = 60.0  # one uniform draw + inverse-CDF lookup
# Atoms shared by at least this many units get their own multinomial category
# (one binomial costs about as much as 20 ragged picks).
_HEAVY_MIN = 20
_PAIR_TABLE_MAX = 1 << 20  # entries in the pair-sum table (8 MiB)
_LATTICE_MAX_SUPPORT = 1 << 16

KERNELS = ("constant", "index", "multinomial", "lattice")


class _Atoms(NamedTuple):
    """Distinct (sum, count) units sorted by (sum, count), and which atom each unit is."""

    sums: np.ndarray
    counts: np.ndarray
    multiplicity: np.ndarray
    unit_atom: np.ndarray


def _atoms(sums: np.ndarray, counts: np.ndarray) -> _Atoms:
    order = np.lexsort((counts, sums))
    s, c = sums[order], counts[order]
    new = np.ones(s.size, dtype=bool)
    new[1:] = (s[1:] != s[:-1]) | (c[1:] != c[:-1])
    starts = np.flatnonzero(new)
    unit_atom = np.empty(s.size, dtype=np.intp)
    unit_atom[order] = np.cumsum(new) - 1
    mult = np.diff(np.append(starts, s.size))
    return _Atoms(s[starts], c[starts], mult, unit_atom)


def _lattice_step_and_support(atoms: _Atoms, n_units: int) -> tuple[int, int] | None:
    """(lattice step, support size of the resampled sum) when the lattice kernel applies:
    integer sums, one common count, and sums small enough to stay exact in float64."""
    s = atoms.sums
    if atoms.counts.min() != atoms.counts.max() or not np.array_equal(s, np.rint(s)):
        return None
    if max(abs(s[0]), abs(s[-1])) * n_units >= 2**52:
        return None
    step = int(np.gcd.reduce((s - s[0]).astype(np.int64)))
    return step, int((s[-1] - s[0]) // step) * n_units + 1


def _kernel_costs(atoms: _Atoms, n_units: int, n_resamples: int) -> dict[tuple[str, int], float]:
    """Estimated nanoseconds per (kernel, heavy_min); the data alone decide, never `batch`."""
    if atoms.sums.size == 1:
        return {("constant", 0): 0.0}
    n = n_units
    costs = {("index", 0): _NS_PER_INDEX * n * n_resamples}
    # No heavy atom: every unit goes through the pool, rows are rectangular.
    pick = _NS_PER_PAIRED_PICK if n * n <= _PAIR_TABLE_MAX else _NS_PER_RAGGED_INDEX
    costs[("multinomial", n + 1)] = (_NS_PER_ROW + pick * n) * n_resamples
    heavy = atoms.multiplicity >= _HEAVY_MIN
    if heavy.any():
        n_light = n - int(atoms.multiplicity[heavy].sum())
        categories = int(heavy.sum()) + (n_light > 0)
        pick = _NS_PER_RAGGED_PICK if n_light**2 <= _PAIR_TABLE_MAX else _NS_PER_RAGGED_INDEX
        per_row = _NS_PER_ROW + _NS_PER_BINOMIAL * (categories - 2) + pick * n_light
        costs[("multinomial", _HEAVY_MIN)] = max(per_row, _NS_PER_ROW) * n_resamples
    lattice = _lattice_step_and_support(atoms, n_units)
    if lattice is not None and lattice[1] <= _LATTICE_MAX_SUPPORT:
        build = _NS_PER_CONV_OP * lattice[1] ** 2 / 2
        costs[("lattice", 0)] = build + _NS_PER_SEARCH * n_resamples
    return costs


def bootstrap_distribution(
    sums: np.ndarray,
    counts: np.ndarray | None,
    n_resamples: int,
    rng: np.random.Generator,
    batch: int | None,
    kernel: str | None = None,
    heavy_min: int | None = None,
) -> tuple[np.ndarray, str]:
    """``n_resamples`` draws of sum(w * sums) / sum(w * counts), w ~ Multinomial(G, 1/G).

    ``counts=None`` means one row per unit (the pair bootstrap).  ``kernel`` forces a
    kernel and ``heavy_min`` the multinomial kernel's heavy-atom threshold (tests); by
    default the cheapest exact kernel runs.  Returns the draws and the kernel's name.
    """
    n_units = sums.size
    c = np.ones(n_units) if counts is None else counts
    atoms = _atoms(sums, c)
    if kernel is None:
        costs = _kernel_costs(atoms, n_units, n_resamples)
        kernel, heavy_min = min(costs, key=costs.__getitem__)
    elif heavy_min is None:
        heavy_min = _HEAVY_MIN
    if kernel == "constant":
        draw, per_resample = _constant_kernel(atoms)
    elif kernel == "index":
        draw, per_resample = _index_kernel(sums, c, rng)
    elif kernel == "multinomial":
        draw, per_resample = _multinomial_kernel(sums, c, atoms, heavy_min, rng)
    elif kernel == "lattice":
        draw, per_resample = _lattice_kernel(atoms, n_units, rng)
    else:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")
    if batch is None:
        batch = max(1, _MAX_BATCH_ELEMENTS // n_units)
    # Cache-sized blocks, never above `batch`; results do not depend on the block size.
    block = max(1, min(batch, _BLOCK_ELEMENTS // per_resample))
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        out[start:stop] = draw(stop - start)
    return out, kernel


_Draw = Callable[[int], np.ndarray]


def _common_count(counts: np.ndarray) -> float | None:
    return float(counts[0]) if counts.min() == counts.max() else None


def _constant_kernel(atoms: _Atoms) -> tuple[_Draw, int]:
    if atoms.sums.size != 1:
        raise ValueError("the constant kernel needs all units equal")
    # Every resample is a multiset of identical units.
    value = atoms.sums[0] / atoms.counts[0]
    return (lambda rows: np.full(rows, value)), 1


def _index_kernel(sums: np.ndarray, counts: np.ndarray, rng: np.random.Generator):
    n = sums.size
    common = _common_count(counts)

    def draw(rows: int) -> np.ndarray:
        # The same draws as scipy's `rng.integers(0, n, (n_resamples, n))`: both use
        # 32-bit Lemire sampling, so the bootstrap distributions coincide.
        idx = rng.integers(0, n, size=(rows, n), dtype=np.uint32)
        numerator = sums[idx].sum(axis=1)
        if common is not None:  # sum of counts is the constant n * c
            return numerator / (common * n)
        return numerator / counts[idx].sum(axis=1)

    return draw, n


def _multinomial_kernel(
    sums: np.ndarray,
    counts: np.ndarray,
    atoms: _Atoms,
    heavy_min: int,
    rng: np.random.Generator,
):
    # Resampling n units with replacement is a Multinomial(n, m/n) draw of how often each
    # atom is picked.  "Heavy" atoms (multiplicity >= heavy_min) get their own category;
    # the remaining "light" units share one, and the K picks that land there are uniform
    # over the light units, so they are drawn as K unit indices (`_LightPool`).  With every
    # atom heavy this is the pure multinomial shortcut (k counts instead of n indices);
    # with none heavy it is plain resampling through the pair table.
    n = sums.size
    heavy = atoms.multiplicity >= heavy_min
    heavy_sums, heavy_counts = atoms.sums[heavy], atoms.counts[heavy]
    light = ~heavy[atoms.unit_atom]
    # The light pool is the last category; without light units the last heavy atom takes
    # the remainder, so no pick can fall outside the atoms.
    weights = atoms.multiplicity[heavy]
    if light.any():
        weights = np.append(weights, np.count_nonzero(light))
    p = weights / n
    common = _common_count(counts)
    # Light indices come from a second, non-overlapping stream (PCG64 jumped by 2^127), so
    # each stream is consumed resample by resample and batching cannot change the result.
    pool = None
    if light.any():
        light_rng = np.random.Generator(rng.bit_generator.jumped())
        light_counts = None if common is not None else counts[light]
        pool = _LightPool(sums[light], light_counts, light_rng, every_unit=not heavy.any())

    def draw(rows: int) -> np.ndarray:
        w = rng.multinomial(n, p, size=rows)
        w_heavy = w if pool is None else w[:, :-1]
        # Row-wise sums, not BLAS matmul, whose summation order depends on the block shape
        # (that would break batch invariance at the last bit).
        numerator = (w_heavy * heavy_sums).sum(axis=1)
        if pool is not None:
            light_sums, light_counts = pool.draw(w[:, -1])
            numerator += light_sums
        if common is not None:  # every resample has n units of count c
            return numerator / (common * n)
        denominator = (w_heavy * heavy_counts).sum(axis=1)
        if pool is not None:
            denominator += light_counts
        return numerator / denominator

    picks = 0 if pool is None else pool.max_draws(n)
    return draw, int(heavy.sum()) + picks


class _LightPool:
    """Sums (and counts) of k[r] uniform picks from a pool of L units, for each row r.

    A uniform u on [0, L^2) is the pair (u // L, u % L) of independent uniform picks, so
    one draw and one gather from the table of pair sums replace two of each.  A row with
    odd k[r] uses its last draw as the single pick u // L.  Each row takes ceil(k[r] / 2)
    consecutive draws from the stream.  Pools too big for the table draw single picks.
    """

    def __init__(
        self,
        sums: np.ndarray,
        counts: np.ndarray | None,
        rng: np.random.Generator,
        every_unit: bool,
    ) -> None:
        # every_unit: the pool holds all units, so every row has k = n picks.
        self.every_unit = every_unit
        self.size = sums.size
        self.sums, self.counts, self.rng = sums, counts, rng
        self.paired = self.size * self.size <= _PAIR_TABLE_MAX
        self.sum_table = self.count_table = None
        if self.paired:
            self.sum_table = (sums[:, None] + sums[None, :]).ravel()
            if counts is not None:
                self.count_table = (counts[:, None] + counts[None, :]).ravel()

    def max_draws(self, picks: int) -> int:
        return (picks + 1) // 2 if self.paired else picks

    def draw(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray | float]:
        size = self.size
        if self.paired:
            per_row = (k + 1) // 2
            u = self.rng.integers(0, size * size, size=int(per_row.sum()), dtype=np.uint32)
            last = (np.cumsum(per_row) - 1)[(k & 1).astype(bool)]
            single = u[last] // size
            tables = [(self.sum_table, self.sums), (self.count_table, self.counts)]
        else:
            per_row = k
            u = self.rng.integers(0, size, size=int(k.sum()), dtype=np.uint32)
            tables = [(self.sums, self.sums), (self.counts, self.counts)]
        out: list[np.ndarray | float] = []
        for table, units in tables if self.counts is not None else tables[:1]:
            values = table[u]
            if self.paired:
                values[last] = units[single]
            out.append(_segment_sums(values, per_row, self.every_unit))
        return out[0], (out[1] if len(out) > 1 else 0.0)


def _segment_sums(values: np.ndarray, lengths: np.ndarray, equal: bool) -> np.ndarray:
    """Sums of consecutive segments of the given lengths (zero for empty segments).

    A segment's rounding must not depend on where it sits in the block, or batching would
    change the last bits: rectangular rows use the row-wise sum and ragged rows
    ``np.bincount``, which adds in element order (``np.add.reduceat`` does not qualify).
    ``equal`` (all lengths equal) must be a property of the data, never of one block,
    because the two branches round differently.
    """
    if equal:
        return values.reshape(lengths.size, int(lengths[0])).sum(axis=1)
    rows = np.repeat(np.arange(lengths.size), lengths)
    return np.bincount(rows, weights=values, minlength=lengths.size)


def _lattice_kernel(atoms: _Atoms, n_units: int, rng: np.random.Generator):
    lattice = _lattice_step_and_support(atoms, n_units)
    if lattice is None:
        raise ValueError("the lattice kernel needs integer sums and one common count")
    step = lattice[0]
    cdf, first = _lattice_cdf(atoms, n_units, step)
    denominator = atoms.counts[0] * n_units

    def draw(rows: int) -> np.ndarray:
        # Inverse-CDF: the smallest lattice point whose CDF exceeds u.
        i = np.searchsorted(cdf, rng.random(rows), side="right")
        return (first + step * i) / denominator

    return draw, 1


def _lattice_cdf(atoms: _Atoms, n_units: int, step: int) -> tuple[np.ndarray, float]:
    """CDF of sum(w * s) on its lattice ``first + step * i``, and ``first``.

    The sum of G i.i.d. draws from the atom distribution has the G-fold convolution of
    the atom pmf as its pmf; binary exponentiation needs O(log G) convolutions.
    """
    offsets = np.rint((atoms.sums - atoms.sums[0]) / step).astype(np.int64)
    base = np.zeros(int(offsets[-1]) + 1)
    base[offsets] = atoms.multiplicity / n_units
    pmf, lead = _convolution_power(base, n_units)
    cdf = np.cumsum(pmf)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    return cdf, float(atoms.sums[0] * n_units + step * lead)


def _convolution_power(base: np.ndarray, power: int) -> tuple[np.ndarray, int]:
    """``base`` convolved with itself ``power`` times, as (pmf, lead): pmf[0] is the
    probability of offset ``lead``; zero tails are trimmed after every step."""
    result: tuple[np.ndarray, int] | None = None
    square = _trim(base, 0)
    while power:
        if power & 1:
            if result is None:
                result = square
            else:
                result = _trim(np.convolve(result[0], square[0]), result[1] + square[1])
        power >>= 1
        if power:
            square = _trim(np.convolve(square[0], square[0]), 2 * square[1])
    assert result is not None
    return result


def _trim(pmf: np.ndarray, lead: int) -> tuple[np.ndarray, int]:
    pmf = np.where(pmf < _TINY, 0.0, pmf)
    nonzero = np.flatnonzero(pmf)
    return pmf[nonzero[0] : nonzero[-1] + 1], lead + int(nonzero[0])
