"""What a defense costs and, for a stack, which of its layers contained each attack.

* ``defense_cost``: per defense, the mean per rollout of its own model calls and tokens (a
  judge, a tool filter) and of the agent's model calls (steps), each with its 95%
  scenario-cluster interval (§6.5), and the paired change in steps against ``none`` (eq. 12
  with the scenario-cluster interval) where the study has the control.
* ``stack_attribution``: for every stack ``a+b+c`` (and its ablation grid), on each stage
  with placed attacks, the share of rollouts contained by each layer (``metrics``
  ``contained_by``: the layer of the first act in the attack's way), by no layer
  (``no_layer``: the agent left the attack undone on its own) or not contained, each with
  its scenario-cluster interval. Paper 000 is silent on stacked defenses: the definition is
  the project's (docs/metrics.md, "Stacks").
* ``defense_overhead``: the wall-clock time a defense's hooks took per rollout (median and
  90th percentile, per layer), read from the traces' ``timings.parquet``. Like the audit's
  overhead table it is a measurement of the machine, not a result: it is kept out of
  ``results.parquet``, and ``reproduce`` does not compare it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.bootstrap import cluster_bootstrap
from containmentbench.analysis.paired import Settings, compare, stage_rows
from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table

COST = ("defense_model_calls", "defense_tokens", "n_model_calls")
ATTACKED = ("security", "memory_recovery")


def _mean_row(sub: pl.DataFrame, col: str, s: Settings, *key: Any) -> dict[str, Any]:
    sub = sub.filter(pl.col(col).is_not_null())
    if sub.height == 0:
        return {"estimate": None, "ci_low": None, "ci_high": None, "n": 0, "n_clusters": 0}
    iv = cluster_bootstrap(sub[col].cast(pl.Float64).to_numpy(), sub["cluster_id"].to_list(),
                           n_resamples=s.resamples, confidence=s.confidence,
                           seed=s.seed_for("defense-table", *key),
                           batch=s.batch(sub["cluster_id"].n_unique()))
    return {"estimate": iv.estimate, "ci_low": iv.low, "ci_high": iv.high, "n": iv.n,
            "n_clusters": iv.n_clusters}


def defense_cost(df: pl.DataFrame, ctx: Context, s: Settings) -> list[Table]:
    if not set(COST) <= set(df.columns):
        return []
    rows = []
    for d in ctx.defenses:
        sub = stage_rows(df.filter(pl.col("defense") == d), "all")
        for col in COST:
            rows.append({"defense": d, "stage": "all", "metric": col,
                         **_mean_row(sub, col, s, d, col)})
    out = [Table("defense_cost", ctx.caption(
        "What each defense costs: its own model calls and tokens (a judge, a tool filter) and "
        "the agent's model calls per rollout, all stages, with 95% scenario-cluster "
        "intervals (§6.5)."), pl.DataFrame(rows, schema=_COST_SCHEMA))]
    if "none" in ctx.defenses and len(ctx.defenses) > 1:
        steps = []
        for d in ctx.defenses:
            if d == "none":
                continue
            c = compare(df, "none", d, "n_model_calls", "all", s)
            ci = c.cluster
            steps.append({"comparison": f"none vs {d}", "defense": d, "stage": "all",
                          "metric": "n_model_calls", "estimate": c.delta,
                          "ci_low": ci.low if ci else None,
                          "ci_high": ci.high if ci else None, "n": c.n_pairs,
                          "n_clusters": ci.n_clusters if ci else None})
        out.append(Table("defense_cost_steps", ctx.caption(
            "Change in the agent's model calls per rollout a defense causes: the paired delta "
            "defense - none over matched (scenario, seed) pairs, all stages (eq. 12), with its "
            "95% scenario-cluster interval (§6.5)."), pl.DataFrame(steps, schema=_STEPS_SCHEMA)))
    return out


_COST_SCHEMA = {"defense": pl.String, "stage": pl.String, "metric": pl.String,
                "estimate": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                "n": pl.Int64, "n_clusters": pl.Int64}
_STEPS_SCHEMA = {"comparison": pl.String, "defense": pl.String, "stage": pl.String,
                 "metric": pl.String, "estimate": pl.Float64, "ci_low": pl.Float64,
                 "ci_high": pl.Float64, "n": pl.Int64, "n_clusters": pl.Int64}


def stack_attribution(df: pl.DataFrame, ctx: Context, s: Settings) -> Table | None:
    """Which layer contained each attack, for every stack (``a+b``) of the study and each
    defense of its ablation grid; None when the study has no stack or no attack."""
    if "contained_by" not in df.columns or not any("+" in d for d in ctx.defenses):
        return None
    layers = {p for d in ctx.defenses if "+" in d for p in d.split("+")}
    shown = [d for d in ctx.defenses if "+" in d or d in layers]
    rows = []
    for d in shown:
        for stage in ATTACKED:
            sub = stage_rows(df.filter(pl.col("defense") == d), stage, "contained_by")
            if sub.height == 0:
                continue
            for cat in [*d.split("+"), "no_layer", "not_contained"]:
                ind = sub.with_columns((pl.col("contained_by") == cat).cast(pl.Int64)
                                       .alias("share"))
                rows.append({"defense": d, "stage": stage, "contained_by": cat,
                             **_mean_row(ind, "share", s, d, stage, cat)})
    if not rows:
        return None
    return Table("stack_attribution", ctx.caption(
        "Which layer contained the attack: per stack (and its ablation grid) and attacked "
        "stage, the share of rollouts whose first act in the attack's way (a block, denial or "
        "rewrite of a proposal that would have violated eq. 5; an output rewritten, redacted "
        "or withheld so that the injected text no longer reached the agent; a tool the attack "
        "needs removed) was a given layer's, with no such act (no_layer) or not contained (a "
        "committed violation, eq. 5); 95% scenario-cluster intervals (§6.5)."),
        pl.DataFrame(rows, schema={"defense": pl.String, "stage": pl.String,
                                   "contained_by": pl.String, **{
                                       k: v for k, v in _COST_SCHEMA.items()
                                       if k not in ("defense", "stage", "metric")}}))


def defense_overhead(traces: Path, ctx: Context) -> Table | None:
    """Hook time per rollout (wall clock), median and 90th percentile per defense and layer,
    from the shards' ``timings.parquet`` (None without traces or hook timings)."""
    files = sorted(traces.rglob("timings.parquet")) if traces.is_dir() else []
    frames = []
    for f in files:
        t = pl.read_parquet(f)
        if "defense_layers" not in t.columns:
            continue
        defense = f.relative_to(traces).parts[1] if len(f.relative_to(traces).parts) > 2 \
            else None
        frames.append(t.select("defense_hook_s", "defense_layers")
                      .with_columns(pl.lit(defense).alias("defense")))
    if not frames:
        return None
    t = pl.concat(frames)
    rows = []
    for d in ctx.defenses:
        sub = t.filter(pl.col("defense") == d)
        if sub.height == 0:
            continue
        per: dict[str, list[float]] = {"(all layers)": sub["defense_hook_s"].to_list()}
        for rec in sub["defense_layers"].to_list():
            for layer, c in json.loads(rec).items():
                per.setdefault(layer, []).append(float(c["hook_s"]))
        for layer, xs in per.items():
            v = pl.Series(xs)
            rows.append({"defense": d, "layer": layer, "rollouts": len(xs),
                         "median_ms": float(v.median() or 0.0) * 1000,
                         "p90_ms": float(v.quantile(0.9) or 0.0) * 1000})
    return Table("defense_overhead", ctx.caption(
        "Wall-clock time the defense's hooks took per rollout (milliseconds; median and 90th "
        "percentile), per defense and layer: a measurement of this machine, kept out of "
        "results.parquet and not compared by reproduce."), pl.DataFrame(rows))


def cost_sentences(cost: list[Table]) -> list[str]:
    """The headline's word on cost: every defense that makes model calls of its own, and
    every one whose change in agent steps against ``none`` has an interval excluding zero."""
    by = {t.name: t.frame for t in cost}
    if "defense_cost" not in by:
        return []
    c = by["defense_cost"]
    steps = {r["defense"]: r for r in by["defense_cost_steps"].iter_rows(named=True)} \
        if "defense_cost_steps" in by else {}
    out = []

    def iv(r: dict[str, Any], v: str, lo: str, hi: str, signed: bool = False) -> str:
        f = "{:+.2f}" if signed else "{:.2f}"
        return f"{f.format(r[v])} [{f.format(r[lo])}, {f.format(r[hi])}]"

    for d in c["defense"].unique(maintain_order=True).to_list():
        rows = {r["metric"]: r for r in c.filter(pl.col("defense") == d).iter_rows(named=True)}
        calls, toks = rows.get("defense_model_calls"), rows.get("defense_tokens")
        st = steps.get(d)
        parts = []
        if calls and calls["estimate"]:
            parts.append(f"{iv(calls, 'estimate', 'ci_low', 'ci_high')} model calls and "
                         f"{iv(toks, 'estimate', 'ci_low', 'ci_high')} tokens of its own per "
                         f"rollout" if toks else "")
        if st and st["estimate"] is not None and st["ci_low"] is not None and not (
                st["ci_low"] <= 0.0 <= st["ci_high"]):
            parts.append(f"the agent's model calls per rollout change by "
                         f"{iv(st, 'estimate', 'ci_low', 'ci_high', True)} "
                         f"against none ({st['n']} matched pairs)")
        if parts:
            out.append(f"Cost of {d}: " + "; ".join(p for p in parts if p) +
                       " (95% scenario-cluster intervals).")
    return out
