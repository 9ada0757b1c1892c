"""The headline figure: security-utility operating points (paper 000 §7, Figs. 3-4).

One panel per utility quantity the study measured: committed policy violation (eq. 5, all
stages) against authorized completion (eq. 6, active-tainted stage), and against clean
completion (clean stage). Every point carries its 95% scenario-cluster interval on both axes
(§6.5, from ``tables/findings``). A defense with zero violations is drawn at 0 with a dashed
bar up to its one-sided rule-of-three bound (§7.2), so "none observed" never reads as "none
possible". A study without a utility stage gets one panel: violation per defense.

Defenses are told apart by colour and marker in a legend below the panels; each defense keeps
its colour and marker by name in every study (``figures.style_of``). Points closer than
1.5% of both axis spans are dodged sideways (:func:`dodge`), their intervals drawn at their
true ends, and the title says so. No label is placed next to a point, so none can collide
with another or leave the axes.

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

from containmentbench.analysis.figures import save, style_of
from containmentbench.analysis.tables import Context
from containmentbench.metrics.glossary import TERMS

NAME = "headline_operating_points"
Y = "committed_harm"
PANELS = ("authorized_tainted_action_success", "clean_benign_completion")


def _axis(metric: str, stage: str) -> str:
    where = "all stages" if stage == "all" else stage.replace("_", "-") + " stage"
    return f"{TERMS[metric].display} ({where}, {TERMS[metric].equation})"


def _point(ax: plt.Axes, x: float, xlo: float, xhi: float, y: dict, defense: str,
           label: str | None, dx: float = 0.0) -> None:
    """One defense's point, drawn ``dx`` to the side of ``x`` when it is dodged; its
    intervals keep their true ends."""
    color, marker = style_of(defense)
    zero = y["events"] == 0 and y["zero_event_bound"] is not None
    mean = y["estimate"]
    ylo, yhi = (0.0, 0.0) if zero else (y["ci_low"], y["ci_high"])
    xd = x + dx
    ax.errorbar([xd], [mean], xerr=[[max(0.0, xd - xlo)], [max(0.0, xhi - xd)]],
                yerr=[[mean - ylo], [yhi - mean]], fmt=marker, color=color,
                ms=7.0, mec="black", mew=0.5, capsize=2, linewidth=0.8, label=label,
                alpha=0.9, zorder=3)
    if zero:  # the one-sided bound after zero events, dashed, with a cap
        ax.plot([xd, xd], [0, y["zero_event_bound"]], ls="--", color=color, lw=1.0, zorder=2)
        ax.plot([xd], [y["zero_event_bound"]], marker="_", ms=8, color=color, mew=1.5,
                zorder=2)


def dodge(points: list[tuple[float, float]], xspan: float, yspan: float,
          close: float = 0.015, step: float = 0.02) -> list[float]:
    """Sideways offsets (in x units) that spread points closer than ``close`` of both axis
    spans: each such group is fanned out ``step`` of the x span apart, centred on its true
    position, in the order given (the study's defense order), so no marker hides another.
    Paper 000 draws no such figure; the dodge is ours, and said so in the title."""
    out = [0.0] * len(points)
    done: set[int] = set()
    for i, (x, y) in enumerate(points):
        if i in done:
            continue
        group = [j for j in range(i, len(points)) if j not in done
                 and abs(points[j][0] - x) <= close * xspan
                 and abs(points[j][1] - y) <= close * yspan]
        done.update(group)
        for k, j in enumerate(group):
            out[j] = (k - (len(group) - 1) / 2) * step * xspan
    return out


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
    dodged = False
    for j, ax in enumerate(axes[0]):
        left = -0.03
        if panels:
            lows = [r["ci_low"] for r in by.values() if r["metric"] == panels[j]
                    and r["ci_low"] is not None]
            # every defense above 0.5: zoom in (the axis says where it starts) so points
            # near 1 stay apart; otherwise the whole 0-1 range
            left = (max(0.0, 0.1 * int(min(lows) * 10) - 0.1) - 0.03
                    if lows and min(lows) > 0.5 else -0.03)
        pts: list[tuple[str, float, float, float, dict]] = []
        for i, d in enumerate(defenses):
            if (d, Y) not in by or by[(d, Y)]["estimate"] is None:
                continue
            y = by[(d, Y)]
            if panels:
                x = by.get((d, panels[j]))
                if x is None or x["estimate"] is None:
                    continue
                xv, xlo, xhi = x["estimate"], x["ci_low"], x["ci_high"]
            else:
                xv = xlo = xhi = float(i)
            pts.append((d, xv, xlo, xhi, y))
        offsets = (dodge([(p[1], p[4]["estimate"]) for p in pts], 1.03 - left, top * 1.1)
                   if panels else [0.0] * len(pts))
        dodged = dodged or any(offsets)
        for (d, xv, xlo, xhi, y), dx in zip(pts, offsets):
            _point(ax, xv, xlo, xhi, y, d, d if j == 0 else None, dx)
        ax.set_ylim(-0.02 * top, top * 1.08)
        ax.set_ylabel(_axis(Y, by[next(d for d in defenses if (d, Y) in by), Y]["stage"]))
        if panels:
            stage = next(r["stage"] for r in by.values() if r["metric"] == panels[j])
            ax.set_xlim(left, 1.03)
            ax.set_xlabel(_axis(panels[j], stage) + "  (higher is better)")
            ax.set_title(f"{TERMS[Y].display} vs {TERMS[panels[j]].display.lower()}",
                         fontsize=10)
        else:
            ax.set_xticks(range(len(defenses)), defenses, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{TERMS[Y].display} per defense", fontsize=10)
        ax.grid(alpha=0.3)
    fig.suptitle("Security-utility operating points, 95% scenario-cluster intervals; dashed: "
                 "one-sided bound after zero events"
                 + ("; coincident points dodged sideways (intervals at their true ends)"
                    if dodged else "")
                 + f"\nmodel {ctx.models}" + (" (simulated agent)" if ctx.sim else ""),
                 fontsize=9)
    fig.legend(loc="lower center", ncol=ncol, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.035))
    fig.tight_layout(rect=(0, 0.05 + 0.06 * rows, 1, 1))
    return save(fig, out, NAME, ctx)
