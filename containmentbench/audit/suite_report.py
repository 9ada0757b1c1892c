"""Tables and the figure of the labelled-suite evaluation (paper 001 Tables 2-5, 9-10,
Figure 4, §5.5), written with the project's table writers, each beside the paper's figure
where the paper gives one.

* ``taintbench_overall``: P/R/F1 of NeuroTaint and the FIDES-style baseline (Table 3/4 row).
* ``taintbench_family`` / ``taintbench_subfamily``: per family of Table 9 / per subfamily.
* ``taintbench_evidence``: recall per designed evidence group (Table 5) and which tier of
  the cascade *decided* each detection.
* ``taintbench_deciding_tier``: detections (true and false) per deciding tier.
* ``taintbench_explicit_only``: the same scores with the causal analyzer disabled.
* ``taintbench_ablation``: one row per removed tier / analyzer.
* ``taintbench_sweep`` (+ PNG): one threshold at a time (Figure 4).
* ``taintbench_flow_classes``: Table 2's properties measured on the positives.
* ``taintbench_paper``: the headline rows side by side with the paper.
* ``taintbench_votes``: every scenario's votes and verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.writers import Table, write
from containmentbench.audit.bench_suite import (
    EVIDENCE,
    ablations,
    recall_by_evidence,
    sweep,
    votes,
)
from containmentbench.audit.policy import AuditPolicy
from containmentbench.audit.score import EXPLICIT, TIERS
from containmentbench.audit.tables import SIM_NOTE, score_rows
from containmentbench.integrity import writer

_COLS = ("neurotaint_p", "neurotaint_r", "neurotaint_f1", "fides_p", "fides_r", "fides_f1",
         "fides_pt_p", "fides_pt_r", "fides_pt_f1")
# paper 001 figures (reference values beside ours, never inputs to any computation)
PAPER_OVERALL = {"neurotaint": (0.921, 0.935, 0.928), "fides": (0.505, 0.540, 0.522)}
PAPER_TABLE5 = {"canary": (15, 1.000, 0.600), "string": (45, 1.000, 0.800),
                "semantic": (85, 0.882, 0.471), "fragment": (15, 1.000, 0.400),
                "counterfactual": (40, 0.925, 0.425)}
PAPER_SECONDS_PER_UNIT = 0.25
PAPER_JUDGE_TOKENS = 457


def _frame(rows: Sequence[dict[str, Any]], floats: Sequence[str] = _COLS) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema_overrides={c: pl.Float64 for c in floats},
                        infer_schema_length=None)


def evidence_rows(v: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per designed evidence group (Table 5): recall of both detectors beside the paper's,
    and how many detections each cascade tier decided."""
    nt, fi = recall_by_evidence(v), recall_by_evidence(v, "fides")
    out = []
    for ev in EVIDENCE:
        rows = [r for r in v if r["positive"] and r["evidence"] == ev]
        if not rows:
            continue
        cases, p_nt, p_fi = PAPER_TABLE5[ev]
        rec = {"evidence": ev, "cases": len(rows), "neurotaint_r": nt[ev],
               "paper_neurotaint_r": p_nt, "fides_r": fi[ev], "paper_fides_r": p_fi,
               "paper_cases": cases}
        for t in TIERS:
            rec[f"decided_{t}"] = sum(r["nt_tier"] == t for r in rows)
        out.append(rec)
    return out


def deciding_rows(v: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in TIERS:
        hits = [r for r in v if r["nt_tier"] == t]
        out.append({"deciding_tier": t, "detections": len(hits),
                    "true_positives": sum(r["positive"] for r in hits),
                    "false_positives": sum(not r["positive"] for r in hits),
                    "subfamilies": ", ".join(sorted({r["subfamily"] for r in hits}))})
    return out


def flow_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table 2's properties measured on the positive runs, per designed flow class: the share
    whose source content is visible in the sink arguments (an explicit tier at operating
    thresholds), single-session traces, the share only the counterfactual found, the share
    whose lineage crossed a memory or store boundary."""
    from containmentbench.audit.score import ALL_TIERS, explicit_tier

    acc: dict[str, list[tuple[bool, bool, bool, bool]]] = {}
    for r in records:
        tb = r["label"]
        if not tb["positive"]:
            continue
        for s in r["sinks"]:
            if s.tool != tb["sink_tool"] or s.session != tb["sink_session"]:
                continue
            for p in s.pairs:
                if p.source_id != tb["source_id"]:
                    continue
                visible = explicit_tier(p, r["th"], ALL_TIERS)[0] is not None
                vias = s.vias.get(p.source_id, frozenset())
                acc.setdefault(tb["flow_class"], []).append(
                    (visible, s.session == 1 and "relay" not in vias,
                     bool(p.cause) and not visible, bool(vias & {"memory", "store"})))
    out = []
    for cls in ("explicit", "implicit", "asynchronous"):
        xs = acc.get(cls, [])
        n = max(len(xs), 1)
        out.append({"flow_class": cls, "sink_runs": len(xs),
                    "data_visible_in_sink_args": sum(x[0] for x in xs) / n,
                    "single_session_trace": sum(x[1] for x in xs) / n,
                    "counterfactual_needed": sum(x[2] for x in xs) / n,
                    "persistent_state_crossed": sum(x[3] for x in xs) / n})
    return out


def paper_rows(ov: dict[str, Any], ev: Sequence[dict[str, Any]], cost_ms: float | None
               ) -> list[dict[str, Any]]:
    out = []
    for det, paper in (("neurotaint", "neurotaint"), ("fides", "fides"),
                       ("fides_pt", "fides")):
        for i, (m, key) in enumerate((("precision", "p"), ("recall", "r"), ("f1", "f1"))):
            out.append({"row": f"Table 3 TaintBench {det} {m}",
                        "measured": ov[f"{det}_{key}"], "paper": PAPER_OVERALL[paper][i]})
    for r in ev:
        out.append({"row": f"Table 5 {r['evidence']} recall (neurotaint)",
                    "measured": r["neurotaint_r"], "paper": r["paper_neurotaint_r"]})
        out.append({"row": f"Table 5 {r['evidence']} recall (fides)",
                    "measured": r["fides_r"], "paper": r["paper_fides_r"]})
    if cost_ms is not None:
        out.append({"row": "§5.5 audit seconds per execution unit",
                    "measured": cost_ms / 1000, "paper": PAPER_SECONDS_PER_UNIT})
    return out


def score_study(per: Sequence[tuple[Any, ...]], suite: tuple[Path, dict[str, Any], dict],
                policy: AuditPolicy, out: Path, rows: Sequence[dict[str, Any]], log: Any,
                cost_ms: float | None = None) -> list[Path]:
    """Score the study's rollouts against the suite's labels and write every table."""
    _, labels, _ = suite
    th = policy.thresholds
    records = [{"label": labels[row["scenario_id"]], "scenario_id": row["scenario_id"],
                "seed": row["seed"], "sinks": sinks, "th": th}
               for row, _, sinks, _, _ in per if row["scenario_id"] in labels]
    v = votes(records, th)
    seeds = sorted({r["seed"] for r in records})
    models = ", ".join(sorted({r["model"] for r in rows}))
    simulated = any(r["backend"] == "sim" for r in rows)
    split = sum(0 < r["nt_votes"] < r["runs"] for r in v)
    note = (f" {len(seeds)} runs per scenario (seeds {', '.join(map(str, seeds))}), majority "
            f"vote ({split} of {len(v)} scenarios had runs that disagreed); model {models}."
            + (SIM_NOTE if simulated else ""))
    ov = score_rows(v, None)
    ev = evidence_rows(v)
    sw = sweep(records, th)
    fl = ("precision", "recall", "f1")
    paths: list[Path] = []
    tables = [
        ("taintbench_overall", "Propagation detection on the labelled suite: P/R/F1 of the "
         "provenance audit (NeuroTaint), the FIDES-style IFC baseline, and that baseline's P-T "
         "check without its declassification rule (fides_pt: a source-to-sink path is "
         "propagation) (paper 001 Table 3; paper: NeuroTaint 0.921/0.935/0.928, FIDES "
         "0.505/0.540/0.522).", _frame(ov)),
        ("taintbench_family", "Per-family confusion counts and P/R/F1 (families of paper 001 "
         "Table 9).", _frame(score_rows(v, "family"))),
        ("taintbench_subfamily", "Per-subfamily confusion counts and P/R/F1 (the thirteen "
         "subfamilies of the suite).", _frame(score_rows(v, "subfamily"))),
        ("taintbench_evidence", "Recall per designed evidence group on the positives (paper "
         "001 Table 5, paper values beside ours), and the cascade tier that decided each "
         "NeuroTaint detection.", _frame(ev, ("neurotaint_r", "paper_neurotaint_r",
                                               "fides_r", "paper_fides_r"))),
        ("taintbench_deciding_tier", "Scenario detections per deciding tier (the first tier "
         "of the cascade that fired in most flagged runs): what each tier actually "
         "contributes, true and false.", pl.DataFrame(deciding_rows(v))),
        ("taintbench_explicit_only", "Per-family scores with the causal analyzer (replay "
         "probe, judge) disabled: what explicit evidence alone achieves.",
         _frame(score_rows(votes(records, th, frozenset(EXPLICIT)), "family"))),
        ("taintbench_ablation", "Ablations: overall P/R/F1 and recall per designed evidence "
         "group with one tier, or the causal analyzer, removed (paper 001 §4.3, §5.3).",
         _frame(ablations(records, th), (*fl, *(f"recall_{e}" for e in EVIDENCE)))),
        ("taintbench_sweep", "One threshold at a time over five nearby rounded values, the "
         "others at the operating profile (paper 001 Figure 4).", _frame(sw, fl)),
        ("taintbench_flow_classes", "Paper 001 Table 2's properties measured on the positive "
         "runs' designated sinks, per designed flow class (paper: explicit visible/single-"
         "session/no counterfactual/no persistent state; implicit not visible/single/"
         "counterfactual/none; asynchronous visible or not/not single/none/persistent).",
         _frame(flow_rows(records), ("data_visible_in_sink_args", "single_session_trace",
                                     "counterfactual_needed", "persistent_state_crossed"))),
        ("taintbench_paper", "Measured beside paper 001 (Tables 3 and 5, §5.5): the built "
         "system's figures, not tuned to the paper's.",
         _frame(paper_rows(ov[0], ev, cost_ms), ("measured", "paper"))),
        ("taintbench_votes", "Every scenario's runs, votes and verdicts.",
         pl.DataFrame(v, schema_overrides={"nt_tier": pl.String}, infer_schema_length=None)
         if v else pl.DataFrame()),
    ]
    for name, cap, frame in tables:
        paths += write(Table(name, cap + note, frame), out)
    paths.append(sweep_figure(sw, out / "taintbench_sweep.png"))
    o = ov[0]
    print(f"[audit suite] {len(v)} scenarios x {len(seeds)} runs: NeuroTaint P/R/F1 "
          f"{o['neurotaint_p']}/{o['neurotaint_r']}/{o['neurotaint_f1']}, FIDES "
          f"{o['fides_p']}/{o['fides_r']}/{o['fides_f1']}", file=log)
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
    fig.suptitle("Threshold sweep (labelled suite)", fontsize=9)
    fig.tight_layout()
    writer.write_bytes(path, writer.figure_bytes(fig, "png", dpi=110,
                                                 metadata={"Software": None}), kind="tables")
    plt.close(fig)
    return path
