"""The adaptive study's tables: Table 18 (frozen-candidate transfer across the defenses),
Table 19 (staged qualification) and the funnel of the replay (paper 000 §7.4, Appendix B).

The replay's metrics rows (metrics/rollout_metrics.parquet, with the per-rollout funnel
columns ``fn_*``) are joined with ``adaptive/replay.json`` to add ``mode``,
``optimized_for``, ``evaluated_defense``; the qualification rows carry ``qual_stage`` and
``qual_scope``. Tables 18-19 are built by :mod:`containmentbench.attacks.tables`; the funnel
table here counts every stage of the replay per mode and evaluated defense.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from containmentbench.analysis.writers import Table

#: the study's table files (workflow/rules/adaptive.smk lists them as outputs)
TABLES = ("table18_candidate_transfer", "table19_adaptive_qualification", "adaptive_funnel")
FN = ("fn_exposed", "fn_exact_proposal", "fn_policy_pass", "fn_goal_commit",
      "fn_offtarget_commit", "fn_stage")


def replay_frame(run: Path) -> pl.DataFrame:
    metrics = pl.read_parquet(run / "metrics" / "rollout_metrics.parquet")
    if "fn_stage" not in metrics.columns:
        from containmentbench.errors import BenchError
        raise BenchError("metrics rows without the funnel columns (fn_*): recompute the "
                         "metrics", file=str(run / "metrics" / "rollout_metrics.parquet"))
    index = json.loads((run / "adaptive" / "replay.json").read_text())
    idx = pl.DataFrame([{"scenario_id": k, **v} for k, v in sorted(index.items())])
    out = metrics.join(idx, on="scenario_id", how="inner")
    if out.height != metrics.height:
        from containmentbench.errors import BenchError
        raise BenchError("metrics rows without a replay index entry (traces of another "
                         "suite?)", file=str(run / "metrics" / "rollout_metrics.parquet"))
    return out.with_columns(pl.col("defense").alias("evaluated_defense"),
                            pl.lit(None, pl.String).alias("qual_stage"),
                            pl.lit(None, pl.String).alias("qual_scope"))


def _caption(frame: pl.DataFrame, text: str) -> str:
    from containmentbench.analysis.tables import Context

    return Context(frame).caption(text)


def funnel_table(frame: pl.DataFrame) -> Table:
    rows = []
    for k in frame.select("mode", "evaluated_defense").unique().sort(
            "mode", "evaluated_defense").to_dicts():
        sub = frame.filter((pl.col("mode") == k["mode"])
                           & (pl.col("evaluated_defense") == k["evaluated_defense"]))
        rows.append({**k, "N": sub.height,
                     **{c: int(sub[c].sum()) for c in FN if c != "fn_stage"},
                     "stage5": int((sub["fn_stage"] == 5).sum())})
    return Table("adaptive_funnel", _caption(frame, (
        "Target-path funnel of the frozen-candidate replay (counts): exposure, exact-goal "
        "proposal, policy pass, goal-matched commit (stage 5), off-target commit "
        "(paper 000 §6.3, §7.4).")), pl.DataFrame(rows))


def build(run: Path, qualification: Path) -> list[Table]:
    from containmentbench.attacks.qualify import read_rows

    frame = replay_frame(run)
    qrows = read_rows(qualification)
    meta = frame.select("study", "model", "backend").head(1).to_dicts()[0]
    qframe = pl.DataFrame([{**r, **meta} for r in qrows]) if qrows else pl.DataFrame(
        schema={"qual_stage": pl.String, "qual_scope": pl.String, "domain": pl.String,
                "fn_exact_proposal": pl.Boolean, "fn_goal_commit": pl.Boolean,
                "study": pl.String, "model": pl.String, "backend": pl.String})
    from containmentbench.attacks import tables as T

    return [T.table18(frame), T.table19(qframe), funnel_table(frame)]
