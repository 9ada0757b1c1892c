"""Results as data: every number of every table as one tidy row (``tables/results.*``).

One row per reported number, in table order: ``study, model, backend, sim_agent,
source_table, source_row, source_column, comparison, defense, stage, metric, statistic,
interval, estimate, ci_low, ci_high, method, n, n_clusters`` (the one vocabulary of every
table, CSV and headline: ``estimate``, ``ci_low``, ``ci_high``, ``n``, ``n_clusters``; no
column is an SQL keyword). ``source_table``/``source_row``/``source_column`` name the cell
the number comes from (the row index of the table's Parquet file), so every table can be
rebuilt from this one; ``metric`` is the glossary key (``metrics/glossary.py``) whatever the
table calls the column; ``stage`` is a stage key, ``all`` or ``stage+stage``. A table's
interval columns (``ci_low``/``ci_high``: the scenario-cluster interval; ``pair_ci_*``: the
pair interval; ``<col>_low``/``<col>_high``) and count columns (``n``, ``<stage>_n``,
``fp_n``, ...) are attached to the number they belong to instead of being rows of their
own; ``interval`` names the interval's method (``cluster``, ``pair``) and is null for a
number without one. ``n`` is the rollouts (pairs, model actions) behind that very number:
the table's count less the number's own ``<col>_na`` (Table 5: N/A rows are left out of a
mean). A paired comparison ``a vs b`` gives its delta (b - a) once per interval method and
the win rate, under ``defense`` b. Written to Parquet and CSV only, frozen and hashed like
every table, and rebuilt by ``reproduce``.
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
COLUMNS = {"study": pl.String, "model": pl.String, "backend": pl.String,
           "sim_agent": pl.Boolean, "source_table": pl.String, "source_row": pl.Int64,
           "source_column": pl.String, "comparison": pl.String, "defense": pl.String,
           "stage": pl.String, "metric": pl.String, "statistic": pl.String,
           "interval": pl.String, "estimate": pl.Float64, "ci_low": pl.Float64,
           "ci_high": pl.Float64, "method": pl.String, "n": pl.Int64, "n_clusters": pl.Int64}
#: count columns: attached to the numbers they count, never rows of their own
N_COLUMNS = ("n", "n_per_defense", "active_n", "clean_n", "fp_n", "n_a", "n_b",
             "differing_pairs", "rollouts")  # rollouts: the audit gap table's count
CLUSTER = "95% scenario-cluster percentile bootstrap (§6.5)"
PAIR = "95% pair percentile bootstrap (§6.5)"
MEAN = "mean over rollouts (eq. 7)"
PAIRED = "paired delta b - a over matched pairs (eq. 12)"
POOLED = ("ratio of sums pooled over the rollouts' model actions (calls), kept beside the "
          "per-rollout mean for comparison (the paper is silent on pooling; Table 5)")


@dataclass(frozen=True)
class Spec:
    """What a table's columns mean where its own columns do not say it."""

    stage: str | None = None                  # the table's stage (no stage column)
    column_stage: Mapping[str, str] = field(default_factory=dict)
    n: Mapping[str, str | None] = field(default_factory=dict)  # value column -> its n column
    na: Mapping[str, str] = field(default_factory=dict)  # value column -> its N/A count column
    k: Mapping[str, str] = field(default_factory=dict)   # value column -> its clusters column
    metric: Mapping[str, str] = field(default_factory=dict)    # value column -> metric key
    skip: Sequence[str] = ()                  # numeric columns that are not results
    metric_of: Callable[[Mapping[str, Any], str], str] | None = None
    stage_of: Callable[[Mapping[str, Any], str], str | None] | None = None
    by_column: bool = False                   # value columns are named by defense
    statistic: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # col -> (stat, how)


_ACTIVE = ("active_exposure", "authorized_completion", "active_no_final_answer",
           "active_duplicate_side_effect")
_CLEAN = ("clean_completion", "clean_no_final_answer", "clean_duplicate_side_effect")
#: Table 11's per-stage counts of left-out rollouts: counted among their own stage's rollouts
_ACTIVE_COUNTS = ("active_excluded_provider_error", "active_excluded_context_overflow",
                  "active_exposure_na", "fp_na")
_CLEAN_COUNTS = ("clean_excluded_provider_error", "clean_excluded_context_overflow")
_FP = ("fp_block", "fp_confirm", "fp_block_pooled", "fp_confirm_pooled")
_RATES22 = ("valid_proposal", "parse_failure", "invalid_tool")
#: per-defense tables (Tables 9, 15, 17): a nullable metric's mean leaves out its N/A rows
_PER_DEFENSE_NA = {"exposure": "exposure_na", "exact_goal_proposal": "exact_goal_proposal_na",
                   "recovery": "recovery_na"}
SPECS: dict[str, Spec] = {
    "table09_security_positive_control": Spec(stage="security", na=_PER_DEFENSE_NA),
    "table11_utility": Spec(
        column_stage={**{c: "active_tainted" for c in (*_ACTIVE, *_FP, *_ACTIVE_COUNTS)},
                      **{c: "clean" for c in (*_CLEAN, *_CLEAN_COUNTS)}},
        n={**{c: "active_n" for c in (*_ACTIVE, *_ACTIVE_COUNTS)}, **{c: "fp_n" for c in _FP},
           **{c: "clean_n" for c in (*_CLEAN, *_CLEAN_COUNTS)}},
        na={"active_exposure": "active_exposure_na"},
        k={**{c: "active_n_clusters" for c in (*_ACTIVE, *_ACTIVE_COUNTS)},
           **{c: "fp_n_clusters" for c in _FP},
           **{c: "clean_n_clusters" for c in (*_CLEAN, *_CLEAN_COUNTS)}},
        metric={"active_no_final_answer": "no_final_answer",
                "active_duplicate_side_effect": "duplicate_side_effect",
                "clean_no_final_answer": "no_final_answer",
                "clean_duplicate_side_effect": "duplicate_side_effect",
                "fp_block_pooled": "false_positive_block_rate",
                "fp_confirm_pooled": "false_positive_confirm_rate"},
        statistic={"fp_block_pooled": ("rate", POOLED), "fp_confirm_pooled": ("rate", POOLED),
                   "fp_block": ("mean", "mean of the per-rollout rates over the active-tainted "
                                        "rollouts with an opportunity (Table 5)"),
                   "fp_confirm": ("mean", "mean of the per-rollout rates over the "
                                          "active-tainted rollouts with an opportunity "
                                          "(Table 5)")}),
    "table15_memory_recovery": Spec(stage="memory_recovery", na=_PER_DEFENSE_NA),
    "table17_policy_aware_stress": Spec(stage="security", na=_PER_DEFENSE_NA),
    "table22_interface_diagnostic": Spec(
        stage="all", na={"exposure": "exposure_na",
                         **{c: "valid_proposal_na" for c in _RATES22},
                         **{f"{c}_pooled": "valid_proposal_na" for c in _RATES22},
                         "truncated": "truncated_na", "truncated_pooled": "truncated_na"},
        metric={f"{c}_pooled": str(key_of(c)) for c in (*_RATES22, "truncated")},
        statistic={**{f"{c}_pooled": ("rate", POOLED) for c in (*_RATES22, "truncated")},
                   **{c: ("mean", "mean of the per-rollout rates over the rollouts with a "
                                  "model action (Table 5)") for c in (*_RATES22, "truncated")}}),
    "table10_trajectory_divergence": Spec(statistic={
        c: ("share", "share of the pairs with equal committed violation (§6.5, Table 10)")
        for c in ("trajectory_divergence", "utility_divergence", "intersection", "union")},
        n={**{c: "matched_pairs" for c in ("matched_pairs", "same_endpoint",
                                           "same_zero_endpoint", "excluded_provider_error",
                                           "excluded_context_overflow", "excluded_na",
                                           "unmatched")},
           **{c: "same_endpoint" for c in ("trajectory_divergence", "utility_divergence",
                                           "intersection", "union")}}),
    "fig03_source": Spec(stage="active_tainted",
                         metric={"estimate": "authorized_tainted_action_success"}),
    "fig04_source": Spec(stage="all", n={"blast_radius_norm": "blast_radius_norm_n"}),
    "fig06_source": Spec(stage="memory_recovery"),
    "table03_stage_accounting": Spec(n={c: "rows" for c in (
        "rows", "scenarios", "defenses", "seeds", "outcome_rows", "excluded_provider_error",
        "excluded_context_overflow")}),
    "table24_parser_reparse": Spec(stage="all"),
    "table26_seed_variance": Spec(statistic={
        "estimate": ("mean", "mean of the per-seed means (eq. 7 per seed; Table 26)")}),
    "exposure_validity": Spec(
        metric_of=lambda r, c: _EXPOSURE[r["quantity"]][0]
        if c in ("estimate", "distinct_traces") else c,
        stage_of=lambda r, c: _EXPOSURE[r["quantity"]][1]),
    "target_path_funnel": Spec(metric_of=lambda r, c: "fn_" + c.removesuffix("_rate")),
    # the stage-contribution table (Table 13) decomposes the logged-spread gap
    "table13_stage_contribution": Spec(by_column=True, metric_of=lambda r, c: (
        c if c in ("weighted_gap", "gap_share") else "blast_radius_norm"), statistic={
        "weighted_gap": ("weighted_gap", "(N_g / N) x (mean_a - mean_b) (Table 13)"),
        "gap_share": ("share", "the stage's weighted gap over the all-stage gap (Table 13)")}),
    "table14_denominator_sensitivity": Spec(by_column=True, metric_of=lambda r, c: (
        "blast_radius_fixed" if "fixed" in r["scope"] else "blast_radius_norm")),
    "rule_attribution": Spec(n={"rows": "differing_pairs"}),
    # the later steps' tables (analysis/late.py): Table 28's checks count over the items
    # checked; a case study's count of matched pairs is its own n
    "table28_integrity_audit": Spec(n={c: "items_checked" for c in ("items_checked",
                                                                    "violations")}),
    "case_studies": Spec(n={"candidates": "candidates"}),
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


def intervals(col: str, cols: Sequence[str]) -> list[tuple[str, str, str]]:
    """(interval name, low column, high column) of the value column ``col``: the one
    vocabulary's ``ci_low``/``ci_high`` (the scenario-cluster interval) of a table's one
    estimate (a paired table's delta b - a included), ``pair_ci_*`` (the pair interval) of a
    paired delta, ``<col>_low``/``<col>_high``
    of a wide table's metric column."""
    if col in ("estimate", "trajectory_divergence") and "ci_low" in cols:
        out = [("cluster", "ci_low", "ci_high")]
        if col == "estimate" and "pair_ci_low" in cols:
            out.append(("pair", "pair_ci_low", "pair_ci_high"))
        return out
    if f"{col}_low" in cols:
        return [("cluster", f"{col}_low", f"{col}_high")]
    return []


_HOW = {"cluster": CLUSTER, "pair": PAIR}


def attached(cols: Sequence[str]) -> set[str]:
    """The columns that are not numbers of their own: counts and intervals."""
    out = {c for c in cols if c in N_COLUMNS or "n_clusters" in c}
    for c in cols:
        for _, lo, hi in intervals(c, cols):
            out |= {lo, hi}
    return out


def _statistic(table: str, col: str, dtype: pl.DataType, cols: Sequence[str] = ()
               ) -> tuple[str, str]:
    if col in ("mean_a", "mean_b"):
        return "mean", "mean over the matched pairs (eq. 12)"
    if col == "estimate" and "mean_a" in cols:  # a paired table: its estimate is b - a
        return "paired_delta", PAIRED
    if table.startswith("audit/"):  # the provenance audit's own tables (analysis/late.py)
        if dtype.is_integer():
            return "count", "count of the provenance audit (paper 001)"
        return "rate", "computed by the provenance audit (paper 001; the table's caption says how)"
    if col == "win_rate":
        return "win_rate", "share of pairs where b is strictly better (§6.5)"
    if col in _BOUNDS or col == "zero_event_bound":
        level = "scenario-cluster" if col.startswith("cluster") or col == "zero_event_bound" \
            else "rollout"
        how = "exact binomial" if "exact" in col else "rule of three"
        return "upper_bound", f"one-sided 95% upper bound after zero events, {how}, {level} (§7.2)"
    if col in ("std", "range"):
        return col, "of per-seed means (Table 26)"
    if col == "distinct_traces":
        return "mean", "mean number of a scenario's seeds whose traces differ"
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


def _side_of(table: str, cols: Sequence[str], col: str) -> str | None:
    """Table 14's value columns are named by defense, a's first: ``a``, ``b`` or None."""
    if SPECS.get(table, Spec()).by_column and {"n_a", "n_b"} <= set(cols):
        named = [c for c in cols if c != "scope"][:2]
        if col in named:
            return "a" if col == named[0] else "b"
    return None


def n_column(table: str, cols: Sequence[str], col: str) -> str | None:
    """The count column of the number in ``col`` (None: the table has none; Table 24's
    counts are over its first row, the input model actions)."""
    side = _side_of(table, cols, col)
    if side is not None:
        return f"n_{side}"
    return SPECS.get(table, Spec()).n.get(col, "n" if "n" in cols else next(
        (c for c in N_COLUMNS if c in cols), None))


def k_column(table: str, cols: Sequence[str], col: str) -> str:
    """The scenario-clusters column of the number in ``col``."""
    side = _side_of(table, cols, col)
    return f"n_clusters_{side}" if side else SPECS.get(table, Spec()).k.get(col, "n_clusters")


def _n_of(t: Table, r: Mapping[str, Any], col: str, spec: Spec) -> int | None:
    """The rollouts (pairs, model actions) behind the number in ``col`` of row ``r``: its
    count column less its own N/A count (Table 5: N/A rows are not in a mean)."""
    if t.name == "table24_parser_reparse":  # every count is over the model actions
        first = t.frame.row(0, named=True)
        return first["count"] if first["quantity"] == "input model actions" else None
    ncol = n_column(t.name, t.frame.columns, col)
    if ncol is None or r.get(ncol) is None:
        return None
    na = spec.na.get(col)
    return int(r[ncol]) - (int(r[na]) if na and r.get(na) is not None else 0)


def rebuild(results: pl.DataFrame, table: str, columns: Sequence[str], height: int
            ) -> pl.DataFrame:
    """Table ``table`` (its header ``columns``, ``height`` rows) rebuilt from the rows of
    ``results.parquet`` alone: every number from its ``estimate``, every interval column
    from ``ci_low``/``ci_high`` by its ``interval`` name, every count column from ``n``
    (plus the number's own N/A count) and every clusters column from ``n_clusters``. Only
    the numeric cells are filled (labels stay null); a count two rows give differently
    raises ValueError, since one table cell cannot hold two numbers."""
    spec = SPECS.get(table, Spec())
    cells: list[dict[str, Any]] = [{} for _ in range(height)]

    def put(i: int, col: str, v: Any) -> None:
        if col in cells[i] and cells[i][col] != v:
            raise ValueError(f"{table} row {i} column {col}: {cells[i][col]} and {v}")
        cells[i][col] = v

    rows = results.filter(pl.col("source_table") == table).to_dicts()
    for x in rows:
        i, col = x["source_row"], x["source_column"]
        put(i, col, x["estimate"])
        for name, lo, hi in intervals(col, columns):
            if name == x["interval"]:
                put(i, lo, x["ci_low"])
                put(i, hi, x["ci_high"])
    for x in rows:  # the counts last: a number's own N/A count is a row of its own
        i, col = x["source_row"], x["source_column"]
        ncol = n_column(table, columns, col)
        if x["n"] is not None and ncol in columns:
            na = spec.na.get(col)
            put(i, ncol, x["n"] + (int(cells[i].get(na) or 0) if na else 0))
        kcol = k_column(table, columns, col)
        if kcol in columns:
            put(i, kcol, x["n_clusters"])
    return pl.DataFrame([{c: cell.get(c) for c in columns} for cell in cells],
                        schema=dict.fromkeys(columns, pl.Float64), orient="row")


def rows_of(t: Table, ctx: Context) -> list[dict[str, Any]]:
    """The results rows of one table."""
    spec = SPECS.get(t.name, Spec())
    cols = t.frame.columns
    skip = attached(cols)
    # a column of nulls only (a stage the study lacks) is a number column without numbers
    values = [c for c in cols if (t.frame[c].dtype.is_numeric() or t.frame[c].dtype == pl.Null)
              and c not in skip
              and c not in spec.skip and c not in ("seed", "case")]
    out: list[dict[str, Any]] = []
    for i, r in enumerate(t.frame.iter_rows(named=True)):
        comp = r.get("comparison") or r.get("models")
        a, b = comp.split(" vs ", 1) if isinstance(comp, str) and " vs " in comp else (None,
                                                                                        None)
        for col in values:
            n = _n_of(t, r, col, spec)
            if r[col] is None and n != 0:
                continue  # an empty cell (N/A); one empty for want of data (n = 0) stays
                #           as a row, so the table's count of 0 is kept
            defense = r.get("defense") or r.get("evaluated_defense")
            if b is not None and "models" not in cols:
                defense = a if _side(col)[1] == "a" else b
            if spec.by_column and col in ctx.defenses:
                defense = col
            stat, method = spec.statistic.get(col) or _statistic(t.name, col,
                                                                 t.frame[col].dtype, cols)
            base = {"study": ctx.study, "model": r.get("model") or ctx.models,
                    "backend": ", ".join(ctx.backends), "sim_agent": ctx.sim,
                    "source_table": t.name, "source_row": i, "source_column": col,
                    "comparison": comp if isinstance(comp, str) else None,
                    "defense": defense, "stage": _row_stage(r, col, spec),
                    "metric": _row_metric(r, col, spec), "statistic": stat,
                    "estimate": _num(r[col]), "n": n,
                    "n_clusters": r.get(k_column(t.name, cols, col))}
            ivs = intervals(col, cols)
            if not ivs:
                out.append({**base, "interval": None, "ci_low": None, "ci_high": None,
                            "method": method})
            for name, lo, hi in ivs:
                out.append({**base, "interval": name, "ci_low": _num(r[lo]),
                            "ci_high": _num(r[hi]), "method": f"{method}, {_HOW[name]}"})
    return out


def results_table(tables: Sequence[Table], ctx: Context) -> Table:
    rows = [x for t in tables for x in rows_of(t, ctx)]
    frame = pl.DataFrame(rows, schema=COLUMNS, orient="row") if rows else \
        pl.DataFrame(schema=COLUMNS)
    return Table(NAME, ctx.caption(
        "Every number of every table as one row: estimate with its interval (ci_low, "
        "ci_high; interval names the method), the method, n and n_clusters; source_table, "
        "source_row and source_column name the cell it comes from; metric is the glossary "
        "key."), frame)
