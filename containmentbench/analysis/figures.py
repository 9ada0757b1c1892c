"""Figures (matplotlib, PNG and PDF) with their source tables.

Fig. 3: authorized tainted-action completion with scenario-cluster intervals; Fig. 4:
endpoint versus logged-spread operating points; Fig. 5: strong-baseline comparison across
observables; Fig. 6: memory/recovery instrumentation (paper 000 §7, Appendix A). The source
table of every figure is written and hashed like any other table; the images carry no
timestamps.

A figure whose stage the study lacks (Fig. 3: active-tainted, Fig. 6: memory/recovery) is not
drawn. Every figure has a title naming the model, axis labels in the glossary's display names
(``metrics/glossary.py``), 95% scenario-cluster bootstrap
intervals on every mean (§6.5), a zero drawn visibly (a marker on the axis, labelled "0")
and distinct from a missing value (an "N/A" label, no bar), and the simulated-agent note.
Operating points are named by a legend below the axes, never by labels beside the points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from containmentbench.analysis.outputs import figure_names
from containmentbench.analysis.paired import Settings, stage_rows
from containmentbench.analysis.parallel import (
    IntervalPool,
    PendingCI,
    cluster_ci,
    quantity_key,
    resolve,
)
from containmentbench.analysis.tables import SIM_NOTE, Context
from containmentbench.analysis.writers import Table
from containmentbench.integrity import writer
from containmentbench.metrics.glossary import STAGE_LABEL, TERMS

_META_PNG = {"Software": None}
_META_PDF = {"Creator": None, "Producer": None, "CreationDate": None}
_CI = {"n": pl.Int64, "n_clusters": pl.Int64, "estimate": pl.Float64, "ci_low": pl.Float64,
       "ci_high": pl.Float64}
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
#: one colour and marker per defense by name, the same in every study's figures (a
#: defense's position in a study's list changes between studies, its name does not)
DEFENSE_STYLE = {
    "none": ("#3b3b3b", "o"), "prompt_only": ("#dd8452", "s"),
    "structured_guard": ("#8172b2", "^"), "tool_boundary": ("#4c72b0", "D"),
    "taint_only_v1": ("#c44e52", "v"), "intent_ledger_v2": ("#55a868", "P"),
    "rollback_v2": ("#937860", "X"), "tool_filter": ("#da8bc3", "<"),
    "spotlighting": ("#ccb974", ">"), "repeat_user_prompt": ("#64b5cd", "h"),
    "pi_detector": ("#8c564b", "*")}
#: styles for other defenses (a user's own), chosen by a hash of the name
_HASH_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#98df8a", "#ff9896")
_HASH_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")


def style_of(defense: str) -> tuple[str, str]:
    """(colour, marker) of a defense by its name: fixed for the built-in defenses, else from
    the sha256 of the name (stable across studies, processes and Python versions)."""
    if defense in DEFENSE_STYLE:
        return DEFENSE_STYLE[defense]
    import hashlib

    h = int.from_bytes(hashlib.sha256(defense.encode()).digest()[:8], "big")
    return (_HASH_COLORS[h % len(_HASH_COLORS)],
            _HASH_MARKERS[(h // len(_HASH_COLORS)) % len(_HASH_MARKERS)])
_Draw = Callable[[], "tuple[Table, plt.Figure]"]


def save(fig: plt.Figure, out: Path, name: str, ctx: Context) -> list[Path]:
    if ctx.sim:
        fig.text(0.5, 0.005, SIM_NOTE, ha="center", va="bottom", fontsize=6, style="italic")
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    writer.write_bytes(paths[0], writer.figure_bytes(fig, "png", dpi=150, metadata=_META_PNG),
                       kind="figures")
    writer.write_bytes(paths[1], writer.figure_bytes(fig, "pdf", metadata=_META_PDF),
                       kind="figures")
    plt.close(fig)
    return paths


def _bars(ax: plt.Axes, xs: Sequence[float], means: Sequence[float | None],
          lows: Sequence[float | None], highs: Sequence[float | None], *, width: float,
          color: str, label: str | None = None) -> None:
    """Bars with intervals; a zero mean gets a visible marker and "0", a missing one "N/A"."""
    top = ax.get_ylim()[1]
    for i, (x, m, lo, hi) in enumerate(zip(xs, means, lows, highs)):
        lab = label if i == 0 else None
        if m is None:
            ax.bar(x, 0, width=width, color=color, label=lab)
            ax.text(x, 0.02 * top, "N/A", ha="center", va="bottom", fontsize=6, color="#666",
                    rotation=90)
            continue
        ax.bar(x, m, width=width, color=color, label=lab, edgecolor="black", linewidth=0.4)
        if lo is not None and hi is not None:
            ax.errorbar([x], [m], yerr=[[max(m - lo, 0)], [max(hi - m, 0)]], fmt="none",
                        ecolor="black", capsize=2, linewidth=0.8)
        if m == 0:
            ax.plot([x], [0], marker="_", markersize=10, color=color, markeredgewidth=2.5,
                    clip_on=False)
            ax.text(x, 0.02 * top, "0", ha="center", va="bottom", fontsize=6)


def _title(ax: plt.Axes, text: str, ctx: Context) -> None:
    ax.set_title(f"{text}\nmodel {ctx.models}" + (" (simulated agent)" if ctx.sim else ""),
                 fontsize=9)


def fig03(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool) -> _Draw:
    act = stage_rows(df, "active_tainted", "authorized_tainted_action_success")
    pending = []
    for d in ctx.defenses:
        sub = act.filter(pl.col("defense") == d)
        if sub.height == 0:
            continue
        pending.append({"defense": d,
                        "ci": cluster_ci(sub, "authorized_tainted_action_success", s, pool,
                                        *quantity_key(d, "authorized_tainted_action_success",
                                                      "active_tainted"))})
    return lambda: _fig03(resolve(pending), ctx)


def _fig03(rows: list[dict[str, Any]], ctx: Context) -> tuple[Table, plt.Figure]:
    src = pl.DataFrame(rows, schema={"defense": pl.String, **_CI})
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.set_ylim(0, 1.05)
    if src.height:
        x = list(range(src.height))
        _bars(ax, x, src["estimate"].to_list(), src["ci_low"].to_list(), src["ci_high"].to_list(),
              width=0.6, color=COLORS[0])
        ax.set_xticks(x, src["defense"].to_list(), rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("defense")
    ax.set_ylabel(f"{TERMS['authorized_tainted_action_success'].display} (eq. 6)")
    _title(ax, "Fig. 3: authorized tainted-action completion (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig03_source", ctx.caption(
        "Source of Fig. 3: authorized completion per defense with scenario-cluster 95% "
        "intervals."), src), fig


def fig04(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool) -> _Draw:
    ok = stage_rows(df.select("defense", "stage", "status", "cluster_id", "committed_harm",
                              "blast_radius_norm"), "all")
    pending = []
    for d in ctx.defenses:
        sub = ok.filter(pl.col("defense") == d)
        if not sub.height:
            continue
        pending.append((d, cluster_ci(sub, "committed_harm", s, pool,
                                      *quantity_key(d, "committed_harm", "all")),
                        cluster_ci(sub, "blast_radius_norm", s, pool,
                                   *quantity_key(d, "blast_radius_norm", "all"))))
    return lambda: _fig04(pending, ctx)


def _fig04(pending: list[tuple[str, PendingCI, PendingCI]], ctx: Context
           ) -> tuple[Table, plt.Figure]:
    v_, b_ = "committed_harm", "blast_radius_norm"  # glossary keys (metrics/glossary.py)
    rows = []
    for d, pv, pb in pending:
        v, b = pv.get(), pb.get()
        # n, n_clusters: the rollouts behind committed_harm (defined on every outcome
        # rollout); blast_radius_norm_n: those behind the spread (null where R_tau is empty)
        rows.append({"defense": d, "n": v["n"], "n_clusters": v["n_clusters"],
                     v_: v["estimate"], f"{v_}_low": v["ci_low"], f"{v_}_high": v["ci_high"],
                     b_: b["estimate"], f"{b_}_low": b["ci_low"], f"{b_}_high": b["ci_high"],
                     f"{b_}_n": b["n"]})
    src = pl.DataFrame(rows, schema={"defense": pl.String, "n": pl.Int64,
                                     "n_clusters": pl.Int64, **{
        f"{m}{s}": pl.Float64 for m in (v_, b_) for s in ("", "_low", "_high")},
        f"{b_}_n": pl.Int64})
    fig, ax = plt.subplots(figsize=(7, 4.8))
    pts = [r for r in rows if r[v_] is not None and r[b_] is not None]
    for i, r in enumerate(pts):
        color, marker = style_of(r["defense"])
        ax.errorbar([r[b_]], [r[v_]], xerr=[[r[b_] - r[f"{b_}_low"]], [r[f"{b_}_high"] - r[b_]]],
                    yerr=[[r[v_] - r[f"{v_}_low"]], [r[f"{v_}_high"] - r[v_]]],
                    fmt=marker, color=color,
                    ms=max(3.0, 7.0 - 0.5 * i), mec="black", mew=0.4, capsize=2,
                    linewidth=0.8, label=r["defense"])
    ax.set_xlim(left=-0.02)
    ax.set_ylim(bottom=-0.02)
    ax.set_xlabel(f"{TERMS['blast_radius_norm'].display}, all stages (eq. 4)")
    ax.set_ylabel(f"{TERMS['committed_harm'].display}, all stages (eq. 5)")
    # the legend below the axes names every defense; no label beside a point, so none can
    # overlap another or the legend, or leave the figure
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4,
              frameon=False)
    _title(ax, "Fig. 4: endpoint vs logged-spread operating points (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig04_source", ctx.caption(
        "Source of Fig. 4: endpoint and logged-spread operating points per defense with "
        "scenario-cluster 95% intervals."), src), fig


_FIG05_OBS = [("committed_harm", "all"),
              ("authorized_tainted_action_success", "active_tainted"),
              ("clean_benign_completion", "clean"), ("blast_radius_norm", "security"),
              ("blast_radius_norm", "all"), ("recovery_success", "memory_recovery")]


def fig05(df: pl.DataFrame, ctx: Context, s: Settings, a: str, b: str, pool: IntervalPool
          ) -> _Draw:
    pending = []
    for metric, stage in _FIG05_OBS:
        base = stage_rows(df.select("defense", "stage", "status", "cluster_id", metric),
                          stage, metric)
        for d in (a, b):
            sub = base.filter(pl.col("defense") == d)
            pending.append({"observable": f"{metric} [{stage}]", "defense": d,
                            "ci": cluster_ci(sub, metric, s, pool, *quantity_key(d, metric, stage))})
    return lambda: _fig05(resolve(pending), ctx, a, b)


def _fig05(rows: list[dict[str, Any]], ctx: Context, a: str, b: str
           ) -> tuple[Table, plt.Figure]:
    obs = _FIG05_OBS
    src = pl.DataFrame(rows, schema={"observable": pl.String, "defense": pl.String,
                                     **_CI})
    fig, ax = plt.subplots(figsize=(8, 4.4))
    ax.set_ylim(0, 1.05)
    n = len(obs)
    for i, d in enumerate((a, b)):
        sub = src.filter(pl.col("defense") == d)
        _bars(ax, [k + 0.4 * i for k in range(n)], sub["estimate"].to_list(),
              sub["ci_low"].to_list(), sub["ci_high"].to_list(), width=0.4,
              color=style_of(d)[0], label=d)
    ax.set_xticks([k + 0.2 for k in range(n)],
                  [f"{TERMS[m].display}\n[{STAGE_LABEL[st].lower()}]" for m, st in obs],
                  rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("mean (rate or normalized spread)")
    ax.legend(fontsize=8)
    _title(ax, f"Fig. 5: {a} vs {b} across observables (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig05_source", ctx.caption(
        f"Source of Fig. 5: {a} versus {b} across endpoint, utility, spread and recovery "
        "observables, with scenario-cluster 95% intervals."), src), fig


_FIG06_COLS = tuple((k, TERMS[k].display) for k in ("memory_reinfection", "recovery_success",
                                                  "rollback_count"))


def fig06(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool) -> _Draw:
    mem = stage_rows(df.select("defense", "stage", "status", "cluster_id",
                               *(c for c, _ in _FIG06_COLS)), "memory_recovery")
    pending = []
    for d in ctx.defenses:
        sub = mem.filter(pl.col("defense") == d)
        if sub.height:
            for col, label in _FIG06_COLS:
                pending.append({"defense": d, "observable": label,
                                "ci": cluster_ci(sub, col, s, pool,
                                                 *quantity_key(d, col, "memory_recovery"))})
    return lambda: _fig06(resolve(pending), ctx)


def _fig06(rows: list[dict[str, Any]], ctx: Context) -> tuple[Table, plt.Figure]:
    cols = _FIG06_COLS
    src = pl.DataFrame(rows, schema={"defense": pl.String, "observable": pl.String,
                                     **_CI})
    fig, ax = plt.subplots(figsize=(8, 4.2))
    defenses = [d for d in ctx.defenses if d in set(src["defense"].to_list())]
    top = max([1.0, *[h for h in src["ci_high"].to_list() if h is not None]])
    ax.set_ylim(0, top * 1.05)
    for i, (_, label) in enumerate(cols):
        sub = src.filter(pl.col("observable") == label)
        _bars(ax, [k + 0.27 * i for k in range(len(defenses))], sub["estimate"].to_list(),
              sub["ci_low"].to_list(), sub["ci_high"].to_list(), width=0.27,
              color=COLORS[i], label=label)
    ax.set_xticks([k + 0.27 for k in range(len(defenses))], defenses, rotation=30, ha="right",
                  fontsize=8)
    ax.set_xlabel("defense")
    ax.set_ylabel("rate (memory reinfection, recovery success) / rollbacks per rollout")
    ax.legend(fontsize=8)
    _title(ax, "Fig. 6: memory/recovery instrumentation (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig06_source", ctx.caption(
        "Source of Fig. 6: memory reinfection, recovery success and rollbacks per defense, "
        "with scenario-cluster 95% intervals."), src), fig


def all_figures(df: pl.DataFrame, ctx: Context, s: Settings, pair: Sequence[str],
                out: Path, pool: IntervalPool | None = None) -> tuple[list[Table], list[Path]]:
    """Every figure the study's stages support and its source table; the intervals of all
    are submitted to ``pool`` (default: computed in this process) before the first figure
    is drawn."""
    tables, paths = [], []
    pool = pool if pool is not None else IntervalPool(1)
    stages = set(stage_rows(df.select("stage", "status"), "all")["stage"].unique().to_list())
    make = {"fig03_authorized_completion": lambda: fig03(df, ctx, s, pool),
            "fig04_operating_points": lambda: fig04(df, ctx, s, pool),
            "fig05_boundary_vs_ledger": lambda: fig05(df, ctx, s, pair[0], pair[1], pool),
            "fig06_memory_recovery": lambda: fig06(df, ctx, s, pool)}
    builders = [(name, make[name]()) for name in figure_names(sorted(stages))]
    for name, build in builders:
        src, fig = build()
        tables.append(src)
        paths += save(fig, out, name, ctx)
    return tables, paths
