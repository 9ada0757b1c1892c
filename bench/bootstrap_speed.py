"""Wall-time benchmark of the paired and scenario-cluster bootstrap (paper §6.5).

Run from the repository root:  python bench/bootstrap_speed.py

(a) The frozen analysis computes 83 bootstrap intervals of 10,000 resamples (§6.5).  We time
    83 intervals on synthetic paired data shaped like the study: evidence stages of 480 to
    2,520 matched pairs, 5 seeds per scenario (96 to 504 clusters), binary endpoints,
    all-zero endpoints, logged-spread-like deltas (mostly tied, the rest continuous) and
    fully continuous deltas; a third of the intervals are scenario-cluster intervals.
(b) The cluster bootstrap against ``scipy.stats.bootstrap`` computing the same interval
    (percentile, paired=True, vectorized ratio statistic on the per-cluster (sum, count)
    arrays), timed side by side on identical inputs, best of several interleaved runs.

Figures only: nothing here asserts on time.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from containmentbench.analysis.bootstrap import (  # noqa: E402
    cluster_bootstrap,
    pair_bootstrap,
)
from containmentbench.analysis.resample import _atoms, _kernel_costs  # noqa: E402

N_RESAMPLES = 10_000
SEEDS_PER_SCENARIO = 5
# Evidence stages of the full-scale run (Tables 11-13): name, matched pairs.
STAGES = [("all", 2520), ("security", 960), ("active", 600), ("memory", 480), ("clean", 480)]
KINDS = ["binary", "zero", "spread", "continuous"]


def synthetic_deltas(kind: str, n_pairs: int, rng: np.random.Generator):
    """Per-row paired deltas m(B) - m(A) and scenario labels, 5 seeds per scenario."""
    n_clusters = n_pairs // SEEDS_PER_SCENARIO
    clusters = np.repeat(np.arange(n_clusters), SEEDS_PER_SCENARIO)
    if kind == "binary":  # e.g. authorized completion, scenario effects shared by seeds
        p = rng.beta(4, 2, n_clusters)[clusters]
        a = rng.random(n_pairs) < p
        b = rng.random(n_pairs) < np.clip(p - 0.07, 0, 1)
        deltas = b.astype(float) - a
    elif kind == "zero":  # both policies without events (zero-event endpoints)
        deltas = np.zeros(n_pairs)
    elif kind == "spread":  # logged taint spread: tainted / total nodes, mostly identical
        total = rng.integers(4, 17, n_pairs)
        a = rng.binomial(total, 0.55) / total
        moved = rng.random(n_pairs) < 0.16
        b = np.where(moved, rng.binomial(total, 0.5) / total, a)
        deltas = b - a
    else:  # fully continuous scores: no two deltas equal (worst case)
        deltas = rng.normal(-0.03, 0.25, n_pairs)
    return deltas, clusters


def kernel_of(values: np.ndarray, clusters: np.ndarray | None) -> str:
    """The kernel the cost model picks (private API; reporting only)."""
    if clusters is None:
        sums, counts = values, np.ones(values.size)
    else:
        sums = np.bincount(clusters, weights=values)
        counts = np.bincount(clusters).astype(float)
    costs = _kernel_costs(_atoms(sums, counts), sums.size, N_RESAMPLES)
    kernel, heavy_min = min(costs, key=costs.__getitem__)
    if kernel == "multinomial":
        return "pair-table" if heavy_min > sums.size else "multinomial"
    return kernel


def study_plan(rng: np.random.Generator):
    plan = []
    for i in range(83):
        stage, n_pairs = STAGES[i % len(STAGES)]
        kind = KINDS[(i // len(STAGES)) % len(KINDS)]
        method = "cluster" if i % 3 == 0 else "pair"
        deltas, clusters = synthetic_deltas(kind, n_pairs, rng)
        plan.append((stage, kind, method, deltas, clusters))
    return plan


def run_plan(plan) -> tuple[float, dict[tuple[str, str], float]]:
    per_kind: dict[tuple[str, str], float] = {}
    start = time.perf_counter()
    for i, (_, kind, method, deltas, clusters) in enumerate(plan):
        t0 = time.perf_counter()
        if method == "pair":
            pair_bootstrap(deltas, n_resamples=N_RESAMPLES, seed=i)
        else:
            cluster_bootstrap(deltas, clusters, n_resamples=N_RESAMPLES, seed=i)
        key = (method, kind)
        per_kind[key] = per_kind.get(key, 0.0) + time.perf_counter() - t0
    return time.perf_counter() - start, per_kind


def ratio_statistic(s, c, axis=-1):
    return s.sum(axis=axis) / c.sum(axis=axis)


def time_against_scipy(kind: str, n_clusters: int, repeats: int = 5):
    rng = np.random.default_rng(n_clusters)
    deltas, clusters = synthetic_deltas(kind, n_clusters * SEEDS_PER_SCENARIO, rng)
    sums = np.bincount(clusters, weights=deltas)
    counts = np.bincount(clusters).astype(float)
    ours_t, scipy_t = [], []
    for r in range(repeats):  # interleaved, so both see the same machine state
        t0 = time.perf_counter()
        ours = cluster_bootstrap(deltas, clusters, n_resamples=N_RESAMPLES, seed=r)
        ours_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref = stats.bootstrap(
            (sums, counts),
            ratio_statistic,
            paired=True,
            vectorized=True,
            n_resamples=N_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(r),
        )
        scipy_t.append(time.perf_counter() - t0)
    return min(ours_t), min(scipy_t), ours, ref.confidence_interval, kernel_of(deltas, clusters)


def study_intervals(metrics_path: Path):
    """The cluster intervals the analysis of a real metrics table computes (config driven):
    (label, per-row deltas, cluster labels)."""
    import polars as pl

    from containmentbench.analysis.paired import pairs
    from containmentbench.config.loader import load_option

    cfg = load_option("analysis", "default")
    df = pl.read_parquet(metrics_path)
    present = set(df["defense"].unique().to_list())
    specs = list(cfg["comparisons"])
    for d in sorted(present - {cfg["sweep"]["baseline"]}):
        specs += [{"a": cfg["sweep"]["baseline"], "b": d, **m} for m in cfg["sweep"]["metrics"]]
    out = []
    for spec in specs:
        if spec["a"] not in present or spec["b"] not in present:
            continue
        p = pairs(df, spec["a"], spec["b"], spec["metric"], spec["stage"])
        if p.height:
            d = (p["value_b"].cast(pl.Float64) - p["value_a"].cast(pl.Float64)).to_numpy()
            out.append((f"{spec['a']}/{spec['b']}/{spec['metric']}/{spec['stage']}", d,
                        p["cluster_id"].to_numpy()))
    return out


def time_study_intervals(metrics_path: Path) -> tuple[float, float, int]:
    """Total time of ours vs scipy over the same real intervals (each best of 3)."""
    ours_total = scipy_total = 0.0
    items = study_intervals(metrics_path)
    for i, (_, deltas, clusters) in enumerate(items):
        _, codes = np.unique(clusters, return_inverse=True)
        sums = np.bincount(codes, weights=deltas)
        counts = np.bincount(codes).astype(float)
        o, sc = [], []
        for r in range(3):
            t0 = time.perf_counter()
            cluster_bootstrap(deltas, codes, n_resamples=N_RESAMPLES, seed=1000 * i + r)
            o.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            stats.bootstrap((sums, counts), ratio_statistic, paired=True, vectorized=True,
                            n_resamples=N_RESAMPLES, method="percentile",
                            rng=np.random.default_rng(r))
            sc.append(time.perf_counter() - t0)
        ours_total += min(o)
        scipy_total += min(sc)
    return ours_total, scipy_total, len(items)


def main() -> None:
    print(f"numpy {np.__version__}, scipy {sys.modules['scipy'].__version__}")
    plan = study_plan(np.random.default_rng(2024))
    run_plan(plan[:5])  # warm-up (imports, allocator)
    walls = []
    per_kind: dict[tuple[str, str], float] = {}
    for _ in range(3):
        wall, per_kind = run_plan(plan)
        walls.append(wall)
    counts: dict[tuple[str, str], int] = {}
    kernels: dict[tuple[str, str], set[str]] = {}
    for _, kind, method, deltas, clusters in plan:
        key = (method, kind)
        counts[key] = counts.get(key, 0) + 1
        kernels.setdefault(key, set()).add(
            kernel_of(deltas, None if method == "pair" else clusters)
        )

    print(f"\n(a) 83 intervals x {N_RESAMPLES:,} resamples (study-shaped synthetic data)")
    print(f"    wall time: best {min(walls):.3f} s, median {statistics.median(walls):.3f} s")
    print(f"    {'method':8} {'metric':11} {'n':>3} {'seconds':>8}  kernel")
    for key in sorted(per_kind):
        print(
            f"    {key[0]:8} {key[1]:11} {counts[key]:>3} {per_kind[key]:>8.3f}  "
            f"{', '.join(sorted(kernels[key]))}"
        )

    print(f"\n(b) cluster bootstrap vs scipy.stats.bootstrap, {N_RESAMPLES:,} resamples, best of 5")
    header = (
        f"    {'metric':11} {'clusters':>8} {'ours ms':>8} {'scipy ms':>9} {'ratio':>6}  kernel"
    )
    print(header + "       ours CI / scipy CI")
    ratios = {}
    for kind in ("binary", "spread", "continuous"):
        for n_clusters in (120, 192, 504):
            ours_s, scipy_s, ours, ref_ci, kernel = time_against_scipy(kind, n_clusters)
            ratio = scipy_s / ours_s
            ratios[(kind, n_clusters)] = ratio
            print(
                f"    {kind:11} {n_clusters:>8} {1e3 * ours_s:>8.2f} {1e3 * scipy_s:>9.2f} "
                f"{ratio:>6.1f}  {kernel:11}  [{ours.low:+.4f}, {ours.high:+.4f}] / "
                f"[{ref_ci.low:+.4f}, {ref_ci.high:+.4f}]"
            )
    study = [r for (kind, _), r in ratios.items() if kind != "continuous"]
    print(
        f"    speed ratio: min {min(ratios.values()):.1f}x over all cases; "
        f"min {min(study):.1f}x on study-shaped metrics (binary, logged spread)"
    )
    metrics = REPO / "results" / "full_main" / "metrics" / "rollout_metrics.parquet"
    if metrics.exists():
        ours_s, scipy_s, n = time_study_intervals(metrics)
        print(f"\n(c) the {n} scenario-cluster intervals of the full_main analysis (config "
              f"comparisons and sweep; simulated-agent metrics): ours {ours_s:.3f} s vs "
              f"scipy {scipy_s:.3f} s -> ratio {scipy_s / ours_s:.1f}x (target >= 5x)")
    else:
        print(f"\n(c) skipped: no {metrics} (run `make run` first)")


if __name__ == "__main__":
    main()
