"""Results as data: every number of every table as one tidy row (``tables/results.*``).

One row per reported number, in table order: ``study, model, backend, table, row, column,
comparison, defense, stage, metric, statistic, estimate, ci_lo, ci_hi, method, n,
n_clusters``. ``table``/``row``/``column`` name the cell the number comes from (the row index
of the table's Parquet file), so every row can be checked against its table; ``metric`` is the
glossary key (``metrics/glossary.py``) whatever the table calls the column; ``stage`` is a
stage key, ``all`` or ``stage+stage``. An interval column (``ci_low``/``ci_high``,
``cluster_ci_*``, ``pair_ci_*``, ``<col>_low``/``<col>_high``) and a count column (``N``,
``pairs``, ...) are attached to the number they belong to instead of being rows of their own.
A paired comparison ``a vs b`` gives its delta (b - a) once with the scenario-cluster and once
with the pair interval, and the win rate, under ``defense`` b. The table is written to
Parquet and CSV only, frozen and hashed like every table, and rebuilt by ``reproduce``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table
from containmentbench.metrics.glossary import key_of, stage_key

NAME = "results"
COLUMNS = {"study": pl.String, "model": pl.String, "backend": pl.String, "table": pl.String,
           "row": pl.Int64, "column": pl.String, "comparison": pl.String,
           "defense": pl.String, "stage": pl.String, "metric": pl.String,
           "statistic": pl.String, "estimate": pl.Float64, "ci_lo": pl.Float64,
           "ci_hi": pl.Float64, "method": pl.String, "n": pl.Int64, "n_clusters": pl.Int64}
N_COLUMNS = ("N", "n", "pairs", "n_per_defense", "active_N", "clean_N")
CLUSTER = "95% scenario-cluster percentile bootstrap (§6.5)"
MEAN = "mean over rollouts (eq. 7)"
PAIRED = "paired delta b - a over matched pairs (eq. 12)"


@dataclass(frozen=True)
class Spec:
    """What a table's columns mean where its own columns do not say it."""

    stage: str | None = None                  # the table's stage (no stage column)
    column_stage: Mapping[str, str] = field(default_factory=dict)
    n: Mapping[str, str | None] = field(default_factory=dict)  # value column -> its N column
    metric: Mapping[str, str] = field(default_factory=dict)    # value column -> metric key
    skip: Sequence[str] = ()                  # numeric columns that are not results
    metric_of: Callable[[Mapping[str, Any], str], str] | None = None
    stage_of: Callable[[Mapping[str, Any], str], str | None] | None = None
    by_column: bool = False                   # value columns are named by defense
    statistic: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # col -> (stat, how)


_UTIL = "active_tainted+clean"
SPECS: dict[str, Spec] = {
    "table09_security_positive_control": Spec(stage="security"),
    "table11_utility": Spec(column_stage={"active_N": "active_tainted",
                                          "active_exposure": "active_tainted",
                                          "authorized_completion": "active_tainted",
                                          "active_no_final_answer": "active_tainted",
                                          "active_duplicate_side_effect": "active_tainted",
                                          "fp_block": _UTIL, "fp_confirm": _UTIL,
                                          "clean_completion": "clean",
                                          "clean_no_final_answer": "clean",
                                          "clean_duplicate_side_effect": "clean"},
                            n={"active_exposure": "active_N",
                               "authorized_completion": "active_N",
                               "active_no_final_answer": "active_N",
                               "active_duplicate_side_effect": "active_N", "fp_block": None,
                               "fp_confirm": None, "clean_completion": "clean_N",
                               "clean_no_final_answer": "clean_N",
                               "clean_duplicate_side_effect": "clean_N"},
                            metric={"active_no_final_answer": "no_final_answer",
                                    "active_duplicate_side_effect": "duplicate_side_effect",
                                    "clean_no_final_answer": "no_final_answer",
                                    "clean_duplicate_side_effect": "duplicate_side_effect"}),
    "table15_memory_recovery": Spec(stage="memory_recovery"),
    "table17_policy_aware_stress": Spec(stage="security"),
    "table22_interface_diagnostic": Spec(stage="all"),
    "table10_trajectory_divergence": Spec(statistic={
        c: ("share", "share of the pairs with equal committed violation (§6.5, Table 10)")
        for c in ("utility_divergence", "intersection", "union")}, n={"trajectory_divergence": "same_endpoint",
                                             "utility_divergence": "same_endpoint",
                                             "intersection": "same_endpoint",
                                             "union": "same_endpoint"}),
    "fig03_source": Spec(stage="active_tainted",
                         metric={"mean": "authorized_tainted_action_success"}),
    "fig04_source": Spec(stage="all"),
    "fig06_source": Spec(stage="memory_recovery"),
    "table26_seed_variance": Spec(skip=("n_seeds",)),
    "exposure_validity": Spec(
        skip=("n_seeds",), metric_of=lambda r, c: _EXPOSURE[r["quantity"]][0]
        if c in ("mean", "distinct_traces") else c,
        stage_of=lambda r, c: _EXPOSURE[r["quantity"]][1]),
    "target_path_funnel": Spec(metric_of=lambda r, c: "fn_" + c.removesuffix("_rate")),
    # the stage-contribution table (Table 13) decomposes the logged-spread gap
    "table13_stage_contribution": Spec(by_column=True, metric_of=lambda r, c: (
        c if c in ("weighted_gap", "gap_share") else "blast_radius_norm")),
    "table14_denominator_sensitivity": Spec(by_column=True, metric_of=lambda r, c: (
        "blast_radius_fixed" if "fixed" in r["scope"] else "blast_radius_norm")),
    "fig05_source": Spec(),
}


def _exposure() -> dict[str, tuple[str, str]]:
    from containmentbench.analysis.exposure import QUANTITIES
    from containmentbench.analysis.headline import scope
    return {label: (col, scope(stages)) for label, col, stages in QUANTITIES}


_EXPOSURE = _exposure()


_BOUNDS = ("rollout_exact_95", "rollout_rule_of_three", "cluster_exact_95",
           "cluster_rule_of_three")


def _side(col: str) -> tuple[str, str | None]:
    """``exposed_a`` -> (``exposed``, ``a``): the side of a paired comparison a column is of."""
    for side in ("a", "b"):
        if col.endswith(f"_{side}"):
            return col[:-2], side
    return col, None


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None if v is None else float(v)
    f = float(v)
    return None if math.isnan(f) else f


def _interval(col: str, cols: Sequence[str]) -> list[tuple[str, str, str, str]]:
    """(low column, high column, statistic, method) of the value column ``col``."""
    if col in ("mean", "trajectory_divergence") and "ci_low" in cols:
        return [("ci_low", "ci_high", "mean", f"{MEAN}, {CLUSTER}")]
    if col == "trajectory_divergence" and "cluster_ci_low" in cols:
        return [("cluster_ci_low", "cluster_ci_high", "share", f"share of pairs, {CLUSTER}")]
    if col == "delta":
        out = [("cluster_ci_low", "cluster_ci_high", "paired_delta", f"{PAIRED}, {CLUSTER}")]
        if "pair_ci_low" in cols:
            out.append(("pair_ci_low", "pair_ci_high", "paired_delta",
                        f"{PAIRED}, 95% pair percentile bootstrap (§6.5)"))
        return out
    if f"{col}_low" in cols:
        return [(f"{col}_low", f"{col}_high", "mean", f"{MEAN}, {CLUSTER}")]
    return []


def _attached(cols: Sequence[str]) -> set[str]:
    out = {c for c in cols if c in N_COLUMNS or c == "n_clusters"}
    for c in cols:
        for lo, hi, _, _ in _interval(c, cols):
            out |= {lo, hi}
    return out


def _statistic(table: str, col: str, dtype: pl.DataType) -> tuple[str, str]:
    if col in ("mean_a", "mean_b"):
        return "mean", "mean over the matched pairs (eq. 12)"
    if col == "win_rate":
        return "win_rate", "share of pairs where b is strictly better (§6.5)"
    if col in _BOUNDS or col == "zero_event_bound":
        level = "scenario-cluster" if col.startswith("cluster") or col == "zero_event_bound" \
            else "rollout"
        how = "exact binomial" if "exact" in col else "rule of three"
        return "upper_bound", f"one-sided 95% upper bound after zero events, {how}, {level} (§7.2)"
    if col in ("std", "range"):
        return col, "of per-seed means (Table 26)"
    if col.endswith("_rate") and table in ("target_path_funnel",):
        return "rate", "count over attacked rollouts (§6.3)"
    if dtype.is_integer():
        return "count", "count"
    return "mean", MEAN


def _row_metric(r: Mapping[str, Any], col: str, spec: Spec) -> str:
    """The glossary key of one cell: the spec's, the column's own when it names a metric,
    else the row's ``metric`` / ``observable`` / ``quantity`` cell."""
    if spec.metric_of is not None:
        return spec.metric_of(r, col)
    if col in spec.metric:
        return spec.metric[col]
    own = key_of(_side(col)[0])
    if own is not None:
        return own
    for name in ("metric", "observable", "quantity"):
        if isinstance(r.get(name), str):
            return key_of(r[name]) or r[name]
    return col


def _row_stage(r: Mapping[str, Any], col: str, spec: Spec) -> str | None:
    if spec.stage_of is not None:
        return spec.stage_of(r, col)
    if col in spec.column_stage:
        return spec.column_stage[col]
    obs = r.get("observable")
    if isinstance(obs, str) and obs.endswith("]") and " [" in obs:
        return obs.rsplit(" [", 1)[1][:-1]
    for name in ("stage", "component", "scope"):
        if isinstance(r.get(name), str):
            k = stage_key(r[name])
            if k in ("security", "memory_recovery", "active_tainted", "clean", "all") \
                    or name == "stage":
                return k
    return spec.stage


def rows_of(t: Table, ctx: Context) -> list[dict[str, Any]]:
    """The results rows of one table."""
    spec = SPECS.get(t.name, Spec())
    cols = t.frame.columns
    attached = _attached(cols)
    values = [c for c in cols if t.frame[c].dtype.is_numeric() and c not in attached
              and c not in spec.skip and c != "seed"]
    out: list[dict[str, Any]] = []
    for i, r in enumerate(t.frame.iter_rows(named=True)):
        comp = r.get("comparison") or r.get("models")
        a, b = comp.split(" vs ", 1) if isinstance(comp, str) and " vs " in comp else (None,
                                                                                        None)
        for col in values:
            if r[col] is None:
                continue
            defense = r.get("defense") or r.get("evaluated_defense")
            if b is not None and "models" not in cols:
                defense = a if _side(col)[1] == "a" else b
            if spec.by_column and col in ctx.defenses:
                defense = col
            ncol = spec.n.get(col, next((c for c in N_COLUMNS if c in cols), None))
            stat, method = spec.statistic.get(col) or _statistic(t.name, col,
                                                                 t.frame[col].dtype)
            base = {"study": ctx.study, "model": r.get("model") or ctx.models,
                    "backend": ", ".join(ctx.backends), "table": t.name, "row": i,
                    "column": col, "comparison": comp if isinstance(comp, str) else None,
                    "defense": defense, "stage": _row_stage(r, col, spec),
                    "metric": _row_metric(r, col, spec), "estimate": _num(r[col]),
                    "n": r.get(ncol) if ncol else None, "n_clusters": r.get("n_clusters")}
            ivs = _interval(col, cols)
            if not ivs:
                out.append({**base, "statistic": stat, "ci_lo": None, "ci_hi": None,
                            "method": method})
            for lo, hi, st, how in ivs:
                out.append({**base, "statistic": st, "ci_lo": _num(r[lo]),
                            "ci_hi": _num(r[hi]), "method": how})
    return out


def results_table(tables: Sequence[Table], ctx: Context) -> Table:
    rows = [x for t in tables for x in rows_of(t, ctx)]
    frame = pl.DataFrame(rows, schema=COLUMNS, orient="row") if rows else \
        pl.DataFrame(schema=COLUMNS)
    return Table(NAME, ctx.caption(
        "Every number of every table as one row: estimate with its interval (ci_lo, ci_hi), "
        "the method, N and scenario clusters; table, row and column name the cell it comes "
        "from; metric is the glossary key."), frame)
