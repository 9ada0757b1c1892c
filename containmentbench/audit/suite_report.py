"""Tables and the figure of the labelled-suite evaluation (paper 001 Tables 3, 5, 10 and
Figure 4), written with the project's table writers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.writers import Table, write
from containmentbench.audit.tables import SIM_NOTE, score_rows
from containmentbench.integrity import writer

_COLS = ("neurotaint_p", "neurotaint_r", "neurotaint_f1", "fides_p", "fides_r", "fides_f1")


def _frame(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema_overrides={c: pl.Float64 for c in _COLS},
                        infer_schema_length=None)


def tier_rows(votes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per designed evidence tier (Table 5): recall of both detectors and, for NeuroTaint,
    how many were found by each tier of the cascade."""
    out = []
    for ev in ("canary", "string", "semantic", "fragment", "counterfactual"):
        rows = [v for v in votes if v["positive"] and v["evidence"] == ev]
        if not rows:
            continue
        rec = {"evidence": ev, "cases": len(rows),
               "neurotaint_r": sum(v["neurotaint"] for v in rows) / len(rows),
               "fides_r": sum(v["fides"] for v in rows) / len(rows)}
        for t in ("canary", "string", "semantic", "fragment", "counterfactual"):
            rec[f"found_{t}"] = sum(v["nt_tier"] == t for v in rows)
        out.append(rec)
    return out


def write_suite_tables(votes: Sequence[dict[str, Any]], sweep_rows: Sequence[dict[str, Any]],
                       out: Path, runs: int, profile: str) -> list[Path]:
    note = (f" {runs} runs per scenario, majority vote; sim agent profile '{profile}'."
            + SIM_NOTE)
    paths = []
    paths += write(Table("taintbench_overall", "Propagation detection on the labelled suite: "
                         "P/R/F1 of the provenance audit (NeuroTaint) and the FIDES-style IFC "
                         "baseline (paper 001 Table 3)." + note,
                         _frame(score_rows(votes, None))), out)
    paths += write(Table("taintbench_family", "Per-family confusion counts and P/R/F1 (paper "
                         "001 Table 10; families of Table 9)." + note,
                         _frame(score_rows(votes, "family"))), out)
    paths += write(Table("taintbench_subfamily", "Per-subfamily scores (semantic_async: the "
                         "30 cross-session cases inside semantic explicit evidence)." + note,
                         _frame(score_rows(votes, "subfamily"))), out)
    paths += write(Table("taintbench_tier", "Recall per designed evidence tier on the 200 "
                         "positives (paper 001 Table 5), and the cascade tier that found each "
                         "NeuroTaint detection." + note, pl.DataFrame(tier_rows(votes))), out)
    paths += write(Table("taintbench_sweep", "One threshold at a time over five nearby rounded "
                         "values, the others at the operating profile (paper 001 Figure 4)."
                         + note, pl.DataFrame(list(sweep_rows),
                                              schema_overrides={"precision": pl.Float64,
                                                                "recall": pl.Float64,
                                                                "f1": pl.Float64})), out)
    paths.append(sweep_figure(sweep_rows, out / "taintbench_sweep.png"))
    return paths


def sweep_figure(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["threshold"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 2.8), sharey=True)
    for ax, name in zip(axes, names):
        rs = [r for r in rows if r["threshold"] == name]
        x = [r["value"] for r in rs]
        for key, style in (("precision", "o-"), ("recall", "s--"), ("f1", "^-.")):
            ax.plot(x, [r[key] if r[key] is not None else float("nan") for r in rs], style,
                    label=key)
        op = [r["value"] for r in rs if r["operating"]]
        if op:
            ax.axvline(op[0], color="grey", lw=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_ylim(0, 1.05)
    axes[0].legend(fontsize=7)
    fig.suptitle("Threshold sweep (sim agent: harness validation)", fontsize=9)
    fig.tight_layout()
    writer.write_bytes(path, writer.figure_bytes(fig, "png", dpi=110,
                                                 metadata={"Software": None}), kind="tables")
    plt.close(fig)
    return path
