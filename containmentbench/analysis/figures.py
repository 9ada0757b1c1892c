"""Figures (matplotlib, PNG and PDF) with their source tables.

Fig. 3: authorized tainted-action completion with scenario-cluster intervals; Fig. 4:
endpoint versus logged-spread operating points; Fig. 5: strong-baseline comparison across
observables; Fig. 6: memory/recovery instrumentation (paper 000 §7, Appendix A). The source
table of every figure is written and hashed like any other table; the images carry no
timestamps.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from containmentbench.analysis.bootstrap import cluster_bootstrap
from containmentbench.analysis.exact import fmean
from containmentbench.analysis.paired import Settings, stage_rows
from containmentbench.analysis.tables import SIM_NOTE, Context
from containmentbench.analysis.writers import Table

_META_PNG = {"Software": None}
_META_PDF = {"Creator": None, "Producer": None, "CreationDate": None}


def _save(fig: plt.Figure, out: Path, name: str, ctx: Context) -> list[Path]:
    if ctx.sim:
        fig.text(0.5, 0.005, SIM_NOTE, ha="center", va="bottom", fontsize=6, style="italic")
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, metadata=_META_PNG)
    fig.savefig(paths[1], metadata=_META_PDF)
    plt.close(fig)
    return paths


def fig03(df: pl.DataFrame, ctx: Context, s: Settings) -> tuple[Table, plt.Figure]:
    act = stage_rows(df, "active_tainted", "authorized_tainted_action_success")
    rows = []
    for d in ctx.defenses:
        sub = act.filter(pl.col("defense") == d)
        if sub.height == 0:
            continue
        v = sub["authorized_tainted_action_success"].cast(pl.Float64).to_numpy()
        ci = cluster_bootstrap(v, sub["cluster_id"].to_list(), n_resamples=s.resamples,
                               confidence=s.confidence, seed=s.seed_for("fig03", d))
        rows.append({"defense": d, "N": sub.height, "mean": ci.estimate, "ci_low": ci.low,
                     "ci_high": ci.high})
    src = pl.DataFrame(rows, schema={"defense": pl.String, "N": pl.Int64, "mean": pl.Float64,
                                     "ci_low": pl.Float64, "ci_high": pl.Float64})
    fig, ax = plt.subplots(figsize=(7, 3.6))
    if src.height:
        x = range(src.height)
        m = src["mean"].to_numpy()
        ax.bar(x, m, color="#4c72b0")
        ax.errorbar(x, m, yerr=[m - src["ci_low"].to_numpy(), src["ci_high"].to_numpy() - m],
                    fmt="none", ecolor="black", capsize=3)
        ax.set_xticks(list(x), src["defense"].to_list(), rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("authorized completion")
    ax.set_title(f"Authorized tainted-action completion ({ctx.models})", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig03_source", ctx.caption(
        "Source of Fig. 3: authorized completion per defense with scenario-cluster 95% "
        "intervals."), src), fig


def fig04(df: pl.DataFrame, ctx: Context) -> tuple[Table, plt.Figure]:
    ok = stage_rows(df, "all")
    rows = [{"defense": d,
             "policy_violation": fmean(ok.filter(pl.col("defense") == d)["committed_harm"]),
             "logged_spread": fmean(ok.filter(pl.col("defense") == d)["blast_radius_norm"])}
            for d in ctx.defenses if ok.filter(pl.col("defense") == d).height]
    src = pl.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(5, 4))
    for r in rows:
        ax.scatter(r["logged_spread"], r["policy_violation"], s=30)
        ax.annotate(r["defense"], (r["logged_spread"], r["policy_violation"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("all-stage logged spread (eq. 4)")
    ax.set_ylabel("committed policy violation (eq. 5)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig04_source", ctx.caption(
        "Source of Fig. 4: endpoint and logged-spread operating points per defense."), src), fig


def fig05(df: pl.DataFrame, ctx: Context, a: str, b: str) -> tuple[Table, plt.Figure]:
    obs = [("committed_harm", "all"), ("authorized_tainted_action_success", "active_tainted"),
           ("clean_benign_completion", "clean"), ("blast_radius_norm", "security"),
           ("blast_radius_norm", "all"), ("recovery_success", "memory_recovery")]
    rows = []
    for metric, stage in obs:
        base = stage_rows(df, stage, metric)
        vals = {}
        for d in (a, b):
            sub = base.filter(pl.col("defense") == d)
            vals[d] = fmean(sub[metric]) if sub.height else None
        rows.append({"observable": f"{metric} [{stage}]", a: vals[a], b: vals[b]})
    src = pl.DataFrame(rows, schema={"observable": pl.String, a: pl.Float64, b: pl.Float64})
    fig, ax = plt.subplots(figsize=(7, 3.6))
    n = src.height
    for i, d in enumerate((a, b)):
        ax.bar([k + 0.4 * i for k in range(n)], src[d].fill_null(0).to_list(), width=0.4,
               label=d)
    ax.set_xticks([k + 0.2 for k in range(n)], src["observable"].to_list(), rotation=30,
                  ha="right", fontsize=7)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig05_source", ctx.caption(
        f"Source of Fig. 5: {a} versus {b} across endpoint, utility, spread and recovery "
        "observables."), src), fig


def fig06(df: pl.DataFrame, ctx: Context) -> tuple[Table, plt.Figure]:
    mem = stage_rows(df, "memory_recovery")
    rows = []
    for d in ctx.defenses:
        sub = mem.filter(pl.col("defense") == d)
        if sub.height:
            rows.append({"defense": d, "reinfection": fmean(sub["memory_reinfection"]),
                         "recovery": fmean(sub["recovery_success"]),
                         "rollback": fmean(sub["rollback_count"])})
    src = pl.DataFrame(rows, schema={"defense": pl.String, "reinfection": pl.Float64,
                                     "recovery": pl.Float64, "rollback": pl.Float64})
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for i, col in enumerate(("reinfection", "recovery", "rollback")):
        ax.bar([k + 0.27 * i for k in range(src.height)], src[col].to_list(), width=0.27,
               label=col)
    ax.set_xticks([k + 0.27 for k in range(src.height)], src["defense"].to_list(), rotation=30,
                  ha="right", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig06_source", ctx.caption(
        "Source of Fig. 6: memory reinfection, recovery success and rollbacks per defense."),
        src), fig


def all_figures(df: pl.DataFrame, ctx: Context, s: Settings, pair: Sequence[str],
                out: Path) -> tuple[list[Table], list[Path]]:
    tables, paths = [], []
    builders = [("fig03_authorized_completion", lambda: fig03(df, ctx, s)),
                ("fig04_operating_points", lambda: fig04(df, ctx)),
                ("fig05_boundary_vs_ledger", lambda: fig05(df, ctx, pair[0], pair[1])),
                ("fig06_memory_recovery", lambda: fig06(df, ctx))]
    for name, build in builders:
        src, fig = build()
        tables.append(src)
        paths += _save(fig, out, name, ctx)
    return tables, paths
