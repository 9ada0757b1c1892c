"""Figures (matplotlib, PNG and PDF) with their source tables.

Fig. 3: authorized tainted-action completion with scenario-cluster intervals; Fig. 4:
endpoint versus logged-spread operating points; Fig. 5: strong-baseline comparison across
observables; Fig. 6: memory/recovery instrumentation (paper 000 §7, Appendix A). The source
table of every figure is written and hashed like any other table; the images carry no
timestamps.

Every figure has a title naming the model, axis labels, 95% scenario-cluster bootstrap
intervals on every mean (§6.5), a zero drawn visibly (a marker on the axis, labelled "0")
and distinct from a missing value (an "N/A" label, no bar), and the simulated-agent note.
Operating points that coincide are labelled once with every defense at that point, so no
label prints on top of another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from containmentbench.analysis.paired import Settings, stage_rows
from containmentbench.analysis.parallel import IntervalPool, PendingCI, cluster_ci, resolve
from containmentbench.analysis.tables import SIM_NOTE, Context
from containmentbench.analysis.writers import Table
from containmentbench.integrity import writer

_META_PNG = {"Software": None}
_META_PDF = {"Creator": None, "Producer": None, "CreationDate": None}
_CI = {"mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64}
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_Draw = Callable[[], "tuple[Table, plt.Figure]"]


def _save(fig: plt.Figure, out: Path, name: str, ctx: Context) -> list[Path]:
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
        pending.append({"defense": d, "N": sub.height,
                        "ci": cluster_ci(sub, "authorized_tainted_action_success", s, pool, "fig03",
                                  d)})
    return lambda: _fig03(resolve(pending), ctx)


def _fig03(rows: list[dict[str, Any]], ctx: Context) -> tuple[Table, plt.Figure]:
    src = pl.DataFrame(rows, schema={"defense": pl.String, "N": pl.Int64, **_CI})
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.set_ylim(0, 1.05)
    if src.height:
        x = list(range(src.height))
        _bars(ax, x, src["mean"].to_list(), src["ci_low"].to_list(), src["ci_high"].to_list(),
              width=0.6, color=COLORS[0])
        ax.set_xticks(x, src["defense"].to_list(), rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("defense")
    ax.set_ylabel("authorized completion rate")
    _title(ax, "Fig. 3: authorized tainted-action completion (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig03_source", ctx.caption(
        "Source of Fig. 3: authorized completion per defense with scenario-cluster 95% "
        "intervals."), src), fig


def _point_labels(rows: list[dict], x: str, y: str) -> list[tuple[float, float, str]]:
    """One label per cluster of (nearly) coincident points, naming every defense there:
    points closer than 2% of the axis span share a label, so none prints over another."""
    span_x = max([r[x] for r in rows] + [1e-9]) - min([r[x] for r in rows] + [0.0]) or 1.0
    span_y = max([r[y] for r in rows] + [1e-9]) - min([r[y] for r in rows] + [0.0]) or 1.0
    groups: list[tuple[float, float, list[str]]] = []
    for r in sorted(rows, key=lambda r: (r[y], r[x])):
        for g in groups:
            if abs(g[0] - r[x]) <= 0.02 * span_x and abs(g[1] - r[y]) <= 0.02 * span_y:
                g[2].append(r["defense"])
                break
        else:
            groups.append((r[x], r[y], [r["defense"]]))
    return [(px, py, ", ".join(ds)) for px, py, ds in groups]


def _place_labels(fig: plt.Figure, ax: plt.Axes,
                  labels: list[tuple[float, float, str]]) -> None:
    """Annotate points, moving each label up until its box overlaps no earlier one."""
    renderer = fig.canvas.get_renderer()
    placed = []
    for px, py, text in labels:
        dy = 6
        while True:
            ann = ax.annotate(text, (px, py), fontsize=7, xytext=(6, dy),
                              textcoords="offset points")
            box = ann.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed) or dy > 120:
                placed.append(box)
                break
            ann.remove()
            dy += 9


def fig04(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool) -> _Draw:
    ok = stage_rows(df.select("defense", "stage", "status", "cluster_id", "committed_harm",
                              "blast_radius_norm"), "all")
    pending = []
    for d in ctx.defenses:
        sub = ok.filter(pl.col("defense") == d)
        if not sub.height:
            continue
        pending.append((d, cluster_ci(sub, "committed_harm", s, pool, "fig04", d, "committed_harm"),
                        cluster_ci(sub, "blast_radius_norm", s, pool, "fig04", d,
                            "blast_radius_norm")))
    return lambda: _fig04(pending, ctx)


def _fig04(pending: list[tuple[str, PendingCI, PendingCI]], ctx: Context
           ) -> tuple[Table, plt.Figure]:
    rows = []
    for d, pv, pb in pending:
        v, b = pv.get(), pb.get()
        rows.append({"defense": d, "policy_violation": v["mean"], "violation_low": v["ci_low"],
                     "violation_high": v["ci_high"], "logged_spread": b["mean"],
                     "spread_low": b["ci_low"], "spread_high": b["ci_high"]})
    src = pl.DataFrame(rows, schema={"defense": pl.String, "policy_violation": pl.Float64,
                                     "violation_low": pl.Float64, "violation_high": pl.Float64,
                                     "logged_spread": pl.Float64, "spread_low": pl.Float64,
                                     "spread_high": pl.Float64})
    fig, ax = plt.subplots(figsize=(7, 4.6))
    pts = [r for r in rows if r["policy_violation"] is not None
           and r["logged_spread"] is not None]
    for i, r in enumerate(pts):
        ax.errorbar([r["logged_spread"]], [r["policy_violation"]],
                    xerr=[[r["logged_spread"] - r["spread_low"]],
                          [r["spread_high"] - r["logged_spread"]]],
                    yerr=[[r["policy_violation"] - r["violation_low"]],
                          [r["violation_high"] - r["policy_violation"]]],
                    fmt=MARKERS[i % len(MARKERS)], color=COLORS[i % len(COLORS)], ms=6,
                    capsize=2, linewidth=0.8, label=r["defense"])
    ax.set_xlim(left=-0.02)
    ax.set_ylim(bottom=-0.02)
    _place_labels(fig, ax, _point_labels(pts, "logged_spread", "policy_violation"))
    ax.set_xlabel("all-stage logged spread (eq. 4)")
    ax.set_ylabel("committed policy violation rate (eq. 5)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
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
                            "N": sub.height,
                            "ci": cluster_ci(sub, metric, s, pool, "fig05", d, metric, stage)})
    return lambda: _fig05(resolve(pending), ctx, a, b)


def _fig05(rows: list[dict[str, Any]], ctx: Context, a: str, b: str
           ) -> tuple[Table, plt.Figure]:
    obs = _FIG05_OBS
    src = pl.DataFrame(rows, schema={"observable": pl.String, "defense": pl.String,
                                     "N": pl.Int64, **_CI})
    fig, ax = plt.subplots(figsize=(8, 4.4))
    ax.set_ylim(0, 1.05)
    n = len(obs)
    for i, d in enumerate((a, b)):
        sub = src.filter(pl.col("defense") == d)
        _bars(ax, [k + 0.4 * i for k in range(n)], sub["mean"].to_list(),
              sub["ci_low"].to_list(), sub["ci_high"].to_list(), width=0.4, color=COLORS[i],
              label=d)
    ax.set_xticks([k + 0.2 for k in range(n)], [f"{m}\n[{st}]" for m, st in obs],
                  rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("mean (rate or normalized spread)")
    ax.legend(fontsize=8)
    _title(ax, f"Fig. 5: {a} vs {b} across observables (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig05_source", ctx.caption(
        f"Source of Fig. 5: {a} versus {b} across endpoint, utility, spread and recovery "
        "observables, with scenario-cluster 95% intervals."), src), fig


_FIG06_COLS = (("memory_reinfection", "reinfection"), ("recovery_success", "recovery"),
               ("rollback_count", "rollbacks per rollout"))


def fig06(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool) -> _Draw:
    mem = stage_rows(df.select("defense", "stage", "status", "cluster_id",
                               *(c for c, _ in _FIG06_COLS)), "memory_recovery")
    pending = []
    for d in ctx.defenses:
        sub = mem.filter(pl.col("defense") == d)
        if sub.height:
            for col, label in _FIG06_COLS:
                pending.append({"defense": d, "observable": label, "N": sub.height,
                                "ci": cluster_ci(sub, col, s, pool, "fig06", d, col)})
    return lambda: _fig06(resolve(pending), ctx)


def _fig06(rows: list[dict[str, Any]], ctx: Context) -> tuple[Table, plt.Figure]:
    cols = _FIG06_COLS
    src = pl.DataFrame(rows, schema={"defense": pl.String, "observable": pl.String,
                                     "N": pl.Int64, **_CI})
    fig, ax = plt.subplots(figsize=(8, 4.2))
    defenses = [d for d in ctx.defenses if d in set(src["defense"].to_list())]
    top = max([1.0, *[h for h in src["ci_high"].to_list() if h is not None]])
    ax.set_ylim(0, top * 1.05)
    for i, (_, label) in enumerate(cols):
        sub = src.filter(pl.col("observable") == label)
        _bars(ax, [k + 0.27 * i for k in range(len(defenses))], sub["mean"].to_list(),
              sub["ci_low"].to_list(), sub["ci_high"].to_list(), width=0.27,
              color=COLORS[i], label=label)
    ax.set_xticks([k + 0.27 for k in range(len(defenses))], defenses, rotation=30, ha="right",
                  fontsize=8)
    ax.set_xlabel("defense")
    ax.set_ylabel("rate (reinfection, recovery) / count (rollbacks)")
    ax.legend(fontsize=8)
    _title(ax, "Fig. 6: memory/recovery instrumentation (95% cluster CI)", ctx)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return Table("fig06_source", ctx.caption(
        "Source of Fig. 6: memory reinfection, recovery success and rollbacks per defense, "
        "with scenario-cluster 95% intervals."), src), fig


def all_figures(df: pl.DataFrame, ctx: Context, s: Settings, pair: Sequence[str],
                out: Path, pool: IntervalPool | None = None) -> tuple[list[Table], list[Path]]:
    """Every figure and its source table; the intervals of all four are submitted to
    ``pool`` (default: computed in this process) before the first figure is drawn."""
    tables, paths = [], []
    pool = pool if pool is not None else IntervalPool(1)
    builders = [("fig03_authorized_completion", fig03(df, ctx, s, pool)),
                ("fig04_operating_points", fig04(df, ctx, s, pool)),
                ("fig05_boundary_vs_ledger", fig05(df, ctx, s, pair[0], pair[1], pool)),
                ("fig06_memory_recovery", fig06(df, ctx, s, pool))]
    for name, build in builders:
        src, fig = build()
        tables.append(src)
        paths += _save(fig, out, name, ctx)
    return tables, paths
