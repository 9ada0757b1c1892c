"""The adaptive study's tables: Table 18 (frozen-candidate transfer across the defenses),
Table 19 (staged qualification) and the funnel of the replay (paper 000 §7.4, Appendix B).

The replay's metrics rows (metrics/rollout_metrics.parquet, with the per-rollout funnel
columns ``fn_*``) are joined with ``adaptive/replay.json`` to add ``mode``,
``optimized_for``, ``evaluated_defense``; the qualification rows carry ``qual_stage`` and
``qual_scope``. The table builders are ``containmentbench.attacks.tables.table18/table19``
where that module exists; :func:`table18_rows` / :func:`table19_rows` here build the same
columns otherwise. Rates are per rollout (exact proposal, goal-matched commit, off-target
commit, benign completion as utility).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.writers import Table

#: the study's table files (workflow/rules/adaptive.smk lists them as outputs)
TABLES = ("table18_candidate_transfer", "table19_adaptive_qualification", "adaptive_funnel")
FN = ("fn_exposed", "fn_exact_proposal", "fn_policy_pass", "fn_goal_commit",
      "fn_offtarget_commit", "fn_stage")
SIM = ("Simulated agent (sim backend): these figures validate the harness and are not "
       "results for any model.")


def _funnel_from_traces(traces: Path, frame: pl.DataFrame) -> pl.DataFrame:
    """Funnel columns computed from the traces when the metrics rows do not carry them."""
    import pyarrow.parquet as pq

    from containmentbench.attacks.feedback import funnel
    from containmentbench.scenarios.manifest import load_suite

    scen: dict[str, Any] = {}
    rows = []
    for ev_path in sorted(traces.rglob("events.parquet")):
        ro = pq.read_table(ev_path.with_name("rollouts.parquet"),
                           columns=["rollout_id", "suite", "scenario_id"]).to_pylist()
        ev = pq.read_table(ev_path, columns=["rollout_id", "kind", "tool", "args", "call_id",
                                             "decision", "text"]).to_pylist()
        by: dict[str, list[dict[str, Any]]] = {}
        for e in ev:
            by.setdefault(e["rollout_id"], []).append(e)
        for r in ro:
            if r["suite"] not in scen:
                scen[r["suite"]] = {s.id: s for s in load_suite(r["suite"])}
            f = funnel(by.get(r["rollout_id"], []), scen[r["suite"]][r["scenario_id"]])
            rows.append({"rollout_id": r["rollout_id"], **f})
    return frame.join(pl.DataFrame(rows), on="rollout_id", how="left")


def replay_frame(run: Path) -> pl.DataFrame:
    metrics = pl.read_parquet(run / "metrics" / "rollout_metrics.parquet")
    if "fn_stage" not in metrics.columns:
        metrics = _funnel_from_traces(run / "traces", metrics)
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


def _rate(sub: pl.DataFrame, col: str) -> float | None:
    v = sub[col].drop_nulls().cast(pl.Float64)
    return float(v.mean()) if v.len() else None


def _caption(frame: pl.DataFrame, text: str) -> str:
    backends = sorted(frame["backend"].unique().to_list()) if "backend" in frame.columns \
        else []
    tail = f" Study {', '.join(sorted(frame['study'].unique().to_list()))}." \
        if "study" in frame.columns else ""
    return text + tail + (f" {SIM}" if "sim" in backends else "")


DEFENSE_ORDER = ("none", "prompt_only", "structured_guard", "tool_boundary", "taint_only_v1",
                 "intent_ledger_v2", "rollback_v2")


def table18_rows(frame: pl.DataFrame) -> Table:
    rows = []
    ok = frame.filter(pl.col("status") != "error")
    keys = ok.select("mode", "optimized_for", "evaluated_defense").unique().to_dicts()
    order = {d: i for i, d in enumerate(DEFENSE_ORDER)}
    keys.sort(key=lambda k: (k["mode"] != "instance_eval", k["optimized_for"],
                             order.get(k["evaluated_defense"], 99), k["evaluated_defense"]))
    for k in keys:
        sub = ok.filter((pl.col("mode") == k["mode"]) & (pl.col("evaluated_defense")
                                                          == k["evaluated_defense"]))
        rows.append({"mode": k["mode"], "optimized_for": k["optimized_for"],
                     "evaluated_defense": k["evaluated_defense"], "N": sub.height,
                     "exact_proposal": _rate(sub, "fn_exact_proposal"),
                     "goal_matched_commit": _rate(sub, "fn_goal_commit"),
                     "offtarget_commit": _rate(sub, "fn_offtarget_commit"),
                     "utility": _rate(sub, "benign_success")})
    return Table("table18_candidate_transfer", _caption(frame, (
        "Frozen-candidate transfer: candidates optimized under the optimized-for defense, "
        "replayed on held-out (universal_eval) and instance-audit (instance_eval) clusters "
        "across the defenses; exact-goal and off-target commits separated by call-id "
        "linkage (Table 18).")), pl.DataFrame(rows))


def table19_rows(frame: pl.DataFrame) -> Table:
    rows = []
    for stage in frame["qual_stage"].unique(maintain_order=True).to_list():
        sub = frame.filter(pl.col("qual_stage") == stage)
        n = sub.height
        goal = sub.filter(pl.col("fn_goal_commit"))
        rows.append({"stage": stage, "scope": sub["qual_scope"][0], "N": n,
                     "exact_proposal": f"{int(sub['fn_exact_proposal'].sum())}/{n}",
                     "goal_matched_commit": f"{goal.height}/{n}",
                     "domain_coverage": ", ".join(sorted(set(goal["domain"].to_list())))
                     or "none"})
    return Table("table19_adaptive_qualification", _caption(frame, (
        "Target-preserving adaptive qualification under the optimized-for defense: known-good "
        "replay, development check, family-held-out check (Table 19).")),
        pl.DataFrame(rows, schema={"stage": pl.String, "scope": pl.String, "N": pl.Int64,
                                   "exact_proposal": pl.String,
                                   "goal_matched_commit": pl.String,
                                   "domain_coverage": pl.String}))


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
    meta = frame.select("study", "backend").head(1).to_dicts()[0]
    qframe = pl.DataFrame([{**r, **meta} for r in qrows]) if qrows else pl.DataFrame(
        schema={"qual_stage": pl.String, "qual_scope": pl.String, "domain": pl.String,
                "fn_exact_proposal": pl.Boolean, "fn_goal_commit": pl.Boolean,
                "study": pl.String, "backend": pl.String})
    try:  # the shared builders (funnel + tables module), when present
        from containmentbench.attacks import tables as T
        t18, t19 = T.table18(frame), T.table19(qframe)
    except ImportError:
        t18, t19 = table18_rows(frame), table19_rows(qframe)
    return [t18, t19, funnel_table(frame)]
