"""The headline figure: security-utility operating points (paper 000 §7, Figs. 3-4).

One panel per utility quantity the study measured: committed policy violation (eq. 5, all
stages) against authorized completion (eq. 6, active-tainted stage), and against clean
completion (clean stage). Every point carries its 95% scenario-cluster interval on both axes
(§6.5, from ``tables/findings``). A defense with zero violations is drawn at 0 with a dashed
bar up to its one-sided rule-of-three bound (§7.2), so "none observed" never reads as "none
possible". A study without a utility stage gets one panel: violation per defense.

Defenses are told apart by colour and marker in a legend below the panels; coincident points
are drawn with shrinking markers so every one stays visible. No label is placed next to a
point, so none can collide with another or leave the axes.

A quantity the study did not measure (``analysis/validity.py``) is not drawn: a panel of an
unmeasured utility is left out, and without a measured violation there is no figure (every
panel plots it); the headline says why instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from containmentbench.analysis.figures import COLORS, MARKERS, save
from containmentbench.analysis.tables import Context
from containmentbench.metrics.glossary import TERMS

NAME = "headline_operating_points"
Y = "committed_harm"
PANELS = ("authorized_tainted_action_success", "clean_benign_completion")


def _axis(metric: str, stage: str) -> str:
    where = "all stages" if stage == "all" else stage.replace("_", "-") + " stage"
    return f"{TERMS[metric].display} ({where}, {TERMS[metric].equation})"


def _point(ax: plt.Axes, x: float, xlo: float, xhi: float, y: dict, i: int, size: float,
           label: str | None) -> None:
    color, marker = COLORS[i % len(COLORS)], MARKERS[i % len(MARKERS)]
    zero = y["events"] == 0 and y["zero_event_bound"] is not None
    ylo, yhi = (0.0, 0.0) if zero else (y["ci_low"], y["ci_high"])
    ax.errorbar([x], [y["estimate"]], xerr=[[x - xlo], [xhi - x]],
                yerr=[[y["estimate"] - ylo], [yhi - y["estimate"]]], fmt=marker, color=color,
                ms=size, mec="black", mew=0.5, capsize=2, linewidth=0.8, label=label,
                alpha=0.9, zorder=3)
    if zero:  # the one-sided bound after zero events, dashed, with a cap
        ax.plot([x, x], [0, y["zero_event_bound"]], ls="--", color=color, lw=1.0, zorder=2)
        ax.plot([x], [y["zero_event_bound"]], marker="_", ms=8, color=color, mew=1.5,
                zorder=2)


def draw(findings: pl.DataFrame, ctx: Context, out: Path,
         unmeasured: Mapping[str, str] | None = None) -> list[Path]:
    """The figure's PNG and PDF (``figures/headline_operating_points.*``); nothing when the
    study has no committed-violation rows or did not measure them (``unmeasured``: metric ->
    reason, module docstring)."""
    unmeasured = unmeasured or {}
    by = {(r["defense"], r["metric"]): r for r in findings.iter_rows(named=True)}
    defenses = list(dict.fromkeys(findings["defense"].to_list()))
    if Y in unmeasured or not any((d, Y) in by for d in defenses):
        return []
    panels = [m for m in PANELS if m not in unmeasured
              and any((d, m) in by for d in defenses)]
    n = max(1, len(panels))
    # one panel: wide enough for the title; the legend in rows that fit the width
    ncol = min(len(defenses), 7 if n > 1 else 4)
    rows = -(-len(defenses) // ncol)
    fig, axes = plt.subplots(1, n, figsize=(max(9.0, 6.2 * n), 4.0 + 0.25 * rows),
                             squeeze=False)
    top = max([by[(d, Y)]["ci_high"] or 0 for d in defenses if (d, Y) in by]
              + [by[(d, Y)]["zero_event_bound"] or 0 for d in defenses if (d, Y) in by]
              + [0.05])
    for j, ax in enumerate(axes[0]):
        seen: dict[tuple[float, float], int] = {}
        for i, d in enumerate(defenses):
            if (d, Y) not in by:
                continue
            y = by[(d, Y)]
            if panels:
                x = by.get((d, panels[j]))
                if x is None or x["estimate"] is None:
                    continue
                xv, xlo, xhi = x["estimate"], x["ci_low"], x["ci_high"]
            else:
                xv = xlo = xhi = float(i)
            n = seen.get((round(xv, 3), round(y["estimate"], 3)), 0)
            seen[(round(xv, 3), round(y["estimate"], 3))] = n + 1
            _point(ax, xv, xlo, xhi, y, i, max(3.0, 8.0 - 1.6 * n), d if j == 0 else None)
        ax.set_ylim(-0.02 * top, top * 1.08)
        ax.set_ylabel(_axis(Y, by[next(d for d in defenses if (d, Y) in by), Y]["stage"]))
        if panels:
            stage = next(r["stage"] for r in by.values() if r["metric"] == panels[j])
            lows = [r["ci_low"] for r in by.values() if r["metric"] == panels[j]
                    and r["ci_low"] is not None]
            # every defense above 0.5: zoom in (the axis says where it starts) so points
            # near 1 stay apart; otherwise the whole 0-1 range
            left = (max(0.0, 0.1 * int(min(lows) * 10) - 0.1) - 0.03
                    if lows and min(lows) > 0.5 else -0.03)
            ax.set_xlim(left, 1.03)
            ax.set_xlabel(_axis(panels[j], stage) + "  (higher is better)")
            ax.set_title(f"{TERMS[Y].display} vs {TERMS[panels[j]].display.lower()}",
                         fontsize=10)
        else:
            ax.set_xticks(range(len(defenses)), defenses, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{TERMS[Y].display} per defense", fontsize=10)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Security-utility operating points, 95% scenario-cluster intervals; dashed: "
                 f"one-sided bound after zero events\nmodel {ctx.models}"
                 + (" (simulated agent)" if ctx.sim else ""), fontsize=9)
    fig.legend(loc="lower center", ncol=ncol, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.035))
    fig.tight_layout(rect=(0, 0.05 + 0.06 * rows, 1, 1))
    return save(fig, out, NAME, ctx)
