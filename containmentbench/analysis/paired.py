"""Paired statistics over the rollout-metrics table (paper 000 §6.5, §7, Appendix J).

Pairs are keyed by (scenario, model, seed) within an evidence stage (eq. 12); intervals come
from :mod:`containmentbench.analysis.bootstrap` (pair and scenario-cluster percentile
bootstrap); each interval's seed is derived from its key, so adding a comparison never
changes another one's interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from containmentbench.analysis import exclusions as X
from containmentbench.analysis.bootstrap import (
    Interval,
    cluster_bootstrap,
    cluster_codes,
    pair_bootstrap,
    win_rate,
    zero_event_bounds,
)
from containmentbench.analysis.exact import fmean
from containmentbench.canonical import stable_int
from containmentbench.metrics.glossary import TERMS
from containmentbench.metrics.glossary import higher_is_better as glossary_higher_is_better
from containmentbench.metrics.schema import PROJECTION

PAIR_KEYS = ["scenario_id", "model", "seed"]

# Direction of each metric (True: higher is better), for win rates (§6.5) and captions, and
# the one display name of each metric: both from the glossary (metrics/glossary.py).
LABELS = {k: t.display for k, t in TERMS.items()}


def higher_is_better(metric: str) -> bool:
    return glossary_higher_is_better(metric)


def stage_rows(df: pl.DataFrame, stage: str, metric: str | None = None) -> pl.DataFrame:
    """Rollouts of one evidence stage (``all``: every stage), ok or step-limit status, with
    the metric defined (Table 5: N/A cells are excluded, never counted as 0)."""
    out = df if stage == "all" else df.filter(pl.col("stage") == stage)
    out = out.filter(pl.col("status") != "error")
    if metric is not None:
        out = out.filter(pl.col(metric).is_not_null())
    return out


def pairs(df: pl.DataFrame, a: str, b: str, metric: str, stage: str) -> pl.DataFrame:
    """Matched (scenario, model, seed) pairs of defenses a and b with both values defined."""
    cols = [*PAIR_KEYS, "stage", "cluster_id", metric]
    # only the columns a pair needs go through the filters (a 10^6-row frame has ~60)
    base = stage_rows(df.select(*cols, "defense", "status"), stage, metric)
    left = base.filter(pl.col("defense") == a).select(cols).rename({metric: "value_a"})
    right = base.filter(pl.col("defense") == b).select([*PAIR_KEYS, "stage", metric]) \
        .rename({metric: "value_b"})
    return left.join(right, on=[*PAIR_KEYS, "stage"], how="inner").sort(
        ["stage", *PAIR_KEYS])


@dataclass(frozen=True)
class Settings:
    resamples: int
    confidence: float
    seed: int
    max_batch_elements: int

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Settings:
        return cls(int(cfg["resamples"]), float(cfg["confidence"]), int(cfg["seed"]),
                   int(cfg["max_batch_elements"]))

    def batch(self, n: int) -> int:
        return max(1, self.max_batch_elements // max(1, n))

    def seed_for(self, *key: Any) -> int:
        return stable_int(self.seed, *key) & 0x7FFFFFFF


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    metric: str
    stage: str
    n_pairs: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    pair: Interval | None
    cluster: Interval | None
    win_rate: float | None
    # seeds behind the pairs (analysis.seeds.distinct_traces over both defenses): the most
    # seeds a scenario has, and the mean number of them that gave distinct traces
    n_seeds: int | None = None
    distinct_traces: float | None = None
    # exposure of each side's rollouts (metrics ``exposed``): a harm delta between rollouts
    # that never showed the model the injection says nothing about the defenses
    exposed_a: float | None = None
    exposed_b: float | None = None

    @property
    def interpretation(self) -> str:
        if self.cluster is None:
            return "no pairs"
        if self.cluster.low == self.cluster.high == 0.0:
            return "tie (identical)"
        if self.cluster.crosses_zero:
            return "tie (interval crosses zero)"
        better = (self.delta or 0) > 0 if higher_is_better(self.metric) else (self.delta or 0) < 0
        return f"{self.b} {'better' if better else 'worse'} than {self.a}"


@dataclass(frozen=True)
class Draws:
    """What the two intervals of one comparison resample (built from the metrics frame, so
    the bootstrap itself can run in another process: see ``analysis.parallel``)."""

    a: str
    b: str
    metric: str
    stage: str
    va: Any
    vb: Any
    clusters: Any
    """Cluster codes in order of first appearance (``bootstrap.cluster_codes``)."""
    pair_kw: dict[str, Any]
    cluster_kw: dict[str, Any]
    # n_seeds, distinct_traces, exposed_a, exposed_b (:func:`pair_context`)
    context: tuple[Any, ...] = (None, None, None, None)

    @property
    def d(self) -> Any:
        return self.vb - self.va


def compare_draws(df: pl.DataFrame, a: str, b: str, metric: str, stage: str,
                  s: Settings) -> Draws | Comparison:
    """The inputs of :func:`compare`'s intervals, or the empty comparison without pairs."""
    p = pairs(df, a, b, metric, stage)
    n = p.height
    if n == 0:
        return Comparison(a, b, metric, stage, 0, None, None, None, None, None, None)
    va = p["value_a"].cast(pl.Float64).to_numpy()
    vb = p["value_b"].cast(pl.Float64).to_numpy()
    key = (a, b, metric, stage)
    clusters = cluster_codes(p["cluster_id"])
    return Draws(a, b, metric, stage, va, vb, clusters,
                 {"n_resamples": s.resamples, "confidence": s.confidence,
                  "seed": s.seed_for("pair", *key), "batch": s.batch(n)},
                 {"n_resamples": s.resamples, "confidence": s.confidence,
                  "seed": s.seed_for("cluster", *key),
                  "batch": s.batch(int(clusters.max()) + 1)},
                 pair_context(df, p, a, b, metric, stage))


def pair_context(df: pl.DataFrame, p: pl.DataFrame, a: str, b: str, metric: str, stage: str
                 ) -> tuple[Any, ...]:
    """What the rollouts behind one comparison's pairs ``p`` were: (n_seeds,
    distinct_traces) -- how many seeds a scenario has and how many of them changed the trace,
    over both defenses (Appendix J: seeds are replicates only when they do) -- and the
    exposure of each side."""
    if "completion_digest" not in df.columns:
        return None, None, None, None
    from containmentbench.analysis.seeds import distinct_traces

    rows = stage_rows(df.select(*PAIR_KEYS, "stage", "defense", "status",
                                "completion_digest", "exposed", metric), stage, metric)
    rows = rows.filter(pl.col("defense").is_in([a, b])).join(
        p.select(*PAIR_KEYS, "stage").unique(), on=[*PAIR_KEYS, "stage"], how="semi")
    d = distinct_traces(rows, ["defense"])  # seeds of one scenario under one defense
    if d.height == 0:
        return None, None, None, None
    exp = [fmean(rows.filter(pl.col("defense") == x)["exposed"]) for x in (a, b)]
    return int(d["n_seeds"].max()), fmean(d["distinct_traces"]), *exp


def pair_interval(w: Draws) -> Interval:
    return pair_bootstrap(w.d, **w.pair_kw)


def cluster_interval(w: Draws) -> Interval:
    return cluster_bootstrap(w.d, w.clusters, **w.cluster_kw)


def finish(w: Draws, pi: Interval, ci: Interval) -> Comparison:
    d = w.d
    return Comparison(w.a, w.b, w.metric, w.stage, len(d), fmean(w.va), fmean(w.vb), fmean(d),
                      pi, ci, win_rate(w.va, w.vb, higher_is_better(w.metric)), *w.context)


def compare(df: pl.DataFrame, a: str, b: str, metric: str, stage: str,
            s: Settings) -> Comparison:
    """Eq. 12 paired delta with pair and scenario-cluster intervals and the paired win rate."""
    w = compare_draws(df, a, b, metric, stage, s)
    if isinstance(w, Comparison):
        return w
    return finish(w, pair_interval(w), cluster_interval(w))


def zero_events(df: pl.DataFrame, metrics: Sequence[str], stages: Sequence[str]
                ) -> pl.DataFrame:
    """Zero-event one-sided upper bounds at rollout and cluster level (§7.2): exact binomial
    95% (1 - 0.05**(1/n)) and the rule of three (3/n), for every defense and stage where the
    endpoint has no observed event."""
    rows = []
    for stage in stages:
        for metric in metrics:
            cols = [metric, "cluster_id", "defense", "stage", "status",
                    *(["error_kind"] if "error_kind" in df.columns else [])]
            everything = df.select(cols) if stage == "all" else \
                df.select(cols).filter(pl.col("stage") == stage)
            base = stage_rows(everything, stage, metric)
            for defense in sorted(base["defense"].unique().to_list()):
                sub = base.filter(pl.col("defense") == defense)
                events = int(sub[metric].sum())
                if events:
                    continue
                n, k = sub.height, sub["cluster_id"].n_unique()
                r, c = zero_event_bounds(n), zero_event_bounds(k)
                cell = everything.filter(pl.col("defense") == defense)
                rows.append({"defense": defense, "metric": metric, "stage": stage, "n": n,
                             "n_clusters": k, "events": 0, **X.errors(cell),
                             "excluded_na": X.na(cell, metric),
                             "rollout_exact_95": r["exact_binomial_95"],
                             "rollout_rule_of_three": r["rule_of_three"],
                             "cluster_exact_95": c["exact_binomial_95"],
                             "cluster_rule_of_three": c["rule_of_three"]})
    return pl.DataFrame(rows, schema={
        "defense": pl.String, "metric": pl.String, "stage": pl.String, "n": pl.Int64,
        "n_clusters": pl.Int64, "events": pl.Int64, "excluded_provider_error": pl.Int64,
        "excluded_context_overflow": pl.Int64, "excluded_na": pl.Int64,
        "rollout_exact_95": pl.Float64,
        "rollout_rule_of_three": pl.Float64, "cluster_exact_95": pl.Float64,
        "cluster_rule_of_three": pl.Float64})


UTILITY_BY_STAGE = {"active_tainted": "authorized_tainted_action_success",
                    "clean": "clean_benign_completion", "memory_recovery": "recovery_success",
                    "security": "benign_success"}


def divergence(df: pl.DataFrame, a: str, b: str, stage: str, s: Settings) -> dict[str, Any]:
    """Outcome-conditioned trajectory divergence (§6.5, Table 10): among (scenario, model,
    seed) pairs with equal committed_harm, the share differing on the defense-invariant
    projection (the twelve derived fields, nulls compared as values) and the share differing
    in the stage's utility metric, their intersection and union, and a scenario-cluster
    interval for the trajectory-divergence share."""
    row, interval = divergence_draws(df, a, b, stage, s)
    return divergence_finish(row, interval() if interval is not None else None)


def divergence_draws(df: pl.DataFrame, a: str, b: str, stage: str, s: Settings
                     ) -> tuple[dict[str, Any], Callable[[], Interval] | None]:
    """:func:`divergence` without its interval, and the (picklable) call that draws it
    (None without pairs of equal endpoint), so the resampling can run in a worker."""
    cols = [*PAIR_KEYS, "stage", "cluster_id", "committed_harm", *PROJECTION,
            *sorted(set(UTILITY_BY_STAGE.values()) - set(PROJECTION))]
    base = stage_rows(df.select(*cols, "defense", "status"), stage)
    left = base.filter(pl.col("defense") == a).select(cols)
    right = base.filter(pl.col("defense") == b).select(cols).drop("cluster_id")
    j = left.join(right, on=[*PAIR_KEYS, "stage"], suffix="_b")
    total = j.height
    same = j.filter(pl.col("committed_harm") == pl.col("committed_harm_b"))
    same_zero = same.filter(pl.col("committed_harm") == 0).height
    if same.height == 0:
        return {"a": a, "b": b, "stage": stage, "pairs": total, "same_endpoint": 0,
                "same_zero_endpoint": 0, "trajectory_divergence": None, "utility_divergence":
                None, "intersection": None, "union": None}, None
    traj = np.zeros(same.height, dtype=bool)
    for f in PROJECTION:
        x, y = same[f], same[f"{f}_b"]
        traj |= ~(x.eq_missing(y).to_numpy())
    util = np.zeros(same.height, dtype=bool)
    for st, f in UTILITY_BY_STAGE.items():
        mask = (same["stage"] == st).to_numpy()
        diff = ~(same[f].eq_missing(same[f"{f}_b"]).to_numpy())
        util |= mask & diff
    codes = cluster_codes(same["cluster_id"])
    interval = partial(cluster_bootstrap, traj.astype(float), codes,
                       n_resamples=s.resamples, confidence=s.confidence,
                       seed=s.seed_for("divergence", a, b, stage),
                       batch=s.batch(int(codes.max()) + 1))
    n = same.height
    return {"a": a, "b": b, "stage": stage, "pairs": total, "same_endpoint": n,
            "same_zero_endpoint": same_zero, "trajectory_divergence": float(traj.mean()),
            "utility_divergence": float(util.mean()),
            "intersection": float((traj & util).mean()), "union": float((traj | util).mean())
            }, interval


def divergence_finish(row: Mapping[str, Any], ci: Interval | None) -> dict[str, Any]:
    return {**row, "ci_low": ci.low if ci is not None else None,
            "ci_high": ci.high if ci is not None else None,
            "n_clusters": ci.n_clusters if ci is not None else None}


def _excluded(df: pl.DataFrame, defenses: Sequence[str], stage: str,
              metric: str) -> dict[str, int]:
    """Rollouts of ``defenses`` on ``stage`` (``all``: every stage) left out of their means:
    provider errors, context overflows and outcome rollouts without ``metric``."""
    cell = df.filter(pl.col("defense").is_in(list(defenses)))
    if stage != "all":
        cell = cell.filter(pl.col("stage") == stage)
    return {**X.errors(cell), "excluded_na": X.na(cell, metric)}


_EXCLUDED_SCHEMA = {"excluded_provider_error": pl.Int64, "excluded_context_overflow": pl.Int64,
                    "excluded_na": pl.Int64}


def stage_contribution(df: pl.DataFrame, a: str, b: str, metric: str,
                       stages: Sequence[str]) -> pl.DataFrame:
    """Table 13: each stage's share of the all-stage gap mean_a - mean_b, with the stage's
    weight N_g / N_total (the all-stage mean is the N-weighted mean of the stage means), and
    the rollouts of both defenses each row leaves out (analysis/exclusions.py)."""
    rows = []
    base = stage_rows(df.select(metric, "defense", "stage", "status", "cluster_id"), "all",
                      metric)
    n_total = base.filter(pl.col("defense") == a).height
    for st in stages:
        sa = base.filter((pl.col("defense") == a) & (pl.col("stage") == st))
        sb = base.filter((pl.col("defense") == b) & (pl.col("stage") == st))
        if sa.height == 0:
            continue
        ma, mb = fmean(sa[metric]), fmean(sb[metric]) if sb.height else None
        gap = (sa.height / n_total) * (ma - mb) if mb is not None else None
        rows.append({"stage": st, "n_per_defense": sa.height,
                     "n_clusters": sa["cluster_id"].n_unique(), "mean_a": ma, "mean_b": mb,
                     "weighted_gap": gap, **_excluded(df, (a, b), st, metric)})
    total_gap = sum(r["weighted_gap"] for r in rows if r["weighted_gap"] is not None)
    for r in rows:
        r["gap_share"] = (r["weighted_gap"] / total_gap) if total_gap and \
            r["weighted_gap"] is not None else None
    allr = {"stage": "all", "n_per_defense": n_total,
            "n_clusters": base.filter(pl.col("defense") == a)["cluster_id"].n_unique(),
            "mean_a": fmean(base.filter(pl.col("defense") == a)[metric]) if n_total else None,
            "mean_b": fmean(base.filter(pl.col("defense") == b)[metric]) if n_total else None,
            "weighted_gap": total_gap, **_excluded(df, (a, b), "all", metric),
            "gap_share": 1.0 if total_gap else None}
    return pl.DataFrame([*rows, allr], schema={
        "stage": pl.String, "n_per_defense": pl.Int64, "n_clusters": pl.Int64,
        "mean_a": pl.Float64, "mean_b": pl.Float64, "weighted_gap": pl.Float64,
        **_EXCLUDED_SCHEMA, "gap_share": pl.Float64}).select(
        "stage", "n_per_defense", "n_clusters", "mean_a", "mean_b", "weighted_gap", "gap_share",
        *_EXCLUDED_SCHEMA)


def sensitivity(df: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
    """Table 14: realized- vs fixed-max-denominator spread, by scope, and the
    completion-conditioned subset (active-tainted pairs where both completed), with the
    rollouts behind each mean and those left out (analysis/exclusions.py). The fixed-max
    denominator is ``metrics.compute._apply_fixed_max``: the maximum |R_tau| over every
    defense of the study per (scenario, model, seed) key."""
    rows = []

    def cell(stage: str, defense: str, col: str) -> pl.DataFrame:
        return stage_rows(df.select(col, "defense", "stage", "status", "cluster_id"), stage,
                          col).filter(pl.col("defense") == defense)

    def k(frame: pl.DataFrame) -> int:  # the scenario clusters behind a mean
        return frame["cluster_id"].n_unique()

    for label, stage, col in (
            ("All stages, realized denominator", "all", "blast_radius_norm"),
            ("Security only, realized denominator", "security", "blast_radius_norm"),
            ("All stages, fixed max denominator", "all", "blast_radius_fixed"),
            ("Security only, fixed max denominator", "security", "blast_radius_fixed"),
            ("Active stage, fixed max denominator", "active_tainted", "blast_radius_fixed")):
        ca, cb = cell(stage, a, col), cell(stage, b, col)
        rows.append({"scope": label, "mean_a": fmean(ca[col]) if ca.height else None,
                     "mean_b": fmean(cb[col]) if cb.height else None, "n_a": ca.height,
                     "n_b": cb.height, "n_clusters_a": k(ca), "n_clusters_b": k(cb),
                     **_excluded(df, (a, b), stage, col),
                     "not_both_completed": None})
    p = pairs(df, a, b, "authorized_tainted_action_success", "active_tainted")
    done = p.filter((pl.col("value_a") == 1) & (pl.col("value_b") == 1))
    keys = done.select(PAIR_KEYS)
    base = stage_rows(df.select(*PAIR_KEYS, "blast_radius_norm", "defense", "stage", "status",
                                "cluster_id"), "active_tainted", "blast_radius_norm")
    sub = base.join(keys, on=PAIR_KEYS, how="semi")
    sa, sb = sub.filter(pl.col("defense") == a), sub.filter(pl.col("defense") == b)
    rows.append({"scope": "Authorized-completion subset",
                 "mean_a": fmean(sa["blast_radius_norm"]) if done.height else None,
                 "mean_b": fmean(sb["blast_radius_norm"]) if done.height else None,
                 "n_a": sa.height if done.height else 0, "n_b": sb.height if done.height else 0,
                 "n_clusters_a": k(sa) if done.height else 0,
                 "n_clusters_b": k(sb) if done.height else 0,
                 **_excluded(df, (a, b), "active_tainted", "authorized_tainted_action_success"),
                 "not_both_completed": p.height - done.height})
    return pl.DataFrame(rows, schema={"scope": pl.String, "mean_a": pl.Float64,
                                      "mean_b": pl.Float64, "n_a": pl.Int64, "n_b": pl.Int64,
                                      "n_clusters_a": pl.Int64, "n_clusters_b": pl.Int64,
                                      **_EXCLUDED_SCHEMA, "not_both_completed": pl.Int64})


def attribution(df: pl.DataFrame, a: str, b: str, metric: str, stage: str) -> pl.DataFrame:
    """Rule-level attribution (§7.2): on pairs whose utility differs, the rule ids that
    stopped a call in each defense's row, with counts."""
    cols = [*PAIR_KEYS, "stage", metric, "stop_rule_ids"]
    base = stage_rows(df.select(*cols, "defense", "status"), stage, metric)
    j = base.filter(pl.col("defense") == a).select(cols).join(
        base.filter(pl.col("defense") == b).select(cols), on=[*PAIR_KEYS, "stage"], suffix="_b")
    diff = j.filter(pl.col(metric) != pl.col(f"{metric}_b"))
    rows = []
    for side, col in ((a, "stop_rule_ids"), (b, "stop_rule_ids_b")):
        counts: dict[str, int] = {}
        for rules in diff[col].to_list():
            for r in rules or ["(no stopping rule)"]:
                counts[r] = counts.get(r, 0) + 1
        for r, c in sorted(counts.items()):
            rows.append({"a": a, "b": b, "metric": metric, "stage": stage, "defense": side,
                         "rule_id": r, "rows": c, "differing_pairs": diff.height})
    return pl.DataFrame(rows, schema={"a": pl.String, "b": pl.String, "metric": pl.String,
                                      "stage": pl.String, "defense": pl.String,
                                      "rule_id": pl.String, "rows": pl.Int64,
                                      "differing_pairs": pl.Int64})
