"""Replay of the frozen candidates across the defenses (paper 000 §6.3, Table 18).

The derived suite holds every frozen candidate substituted into every held-out scenario
(``universal_eval``: one candidate for all unseen families) and into every instance-audit
scenario (``instance_eval``), target action preserved (attacks/derive.py). It is written as a
standard scenario suite (manifest, per-stage JSONL, hashes) inside the run directory and run
through the standard shard path: every configured defense x the study's fresh seeds, jobs of
runtime/job.py, shards with SHA256SUMS under ``traces/``, then the standard ``metrics``
verb. ``replay.json`` maps each derived scenario to its mode and candidate, which the tables
join on. :func:`build_tables` makes the study's tables from the replay's metrics rows (with
the per-rollout funnel columns ``fn_*``) joined with that index (``mode``, ``optimized_for``,
``evaluated_defense``) and the qualification rows (``qual_stage``, ``qual_scope``): Tables
18-19 through :mod:`containmentbench.attacks.tables`, and the replay's funnel counts per mode
and evaluated defense.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.writers import Table
from containmentbench.attacks.derive import derive
from containmentbench.attacks.settings import Adaptive
from containmentbench.canonical import canonical_json
from containmentbench.scenarios.model import Scenario

MODES = (("universal_eval", "heldout"), ("instance_eval", "audit"))
INDEX = "replay.json"


def suite_path(data: dict[str, Any]) -> Path:
    from containmentbench.pipeline.plan import run_dir
    return run_dir(data) / "adaptive" / "suite"


def build_suite(data: dict[str, Any], A: Adaptive, frozen: list[dict[str, Any]],
                by_id: dict[str, Scenario], splits: dict[str, Any]
                ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Derived records by stage, and the index (derived id -> mode, candidate, base)."""
    name = str(suite_path(data))
    records: dict[str, list[dict[str, Any]]] = {}
    index: dict[str, Any] = {}
    for mode, split in MODES:
        for c in frozen:
            for sid in splits["splits"][split]["scenarios"]:
                s = by_id[sid]
                rec = derive(s, c, name, A.policy_family, mode)
                records.setdefault(s.stage, []).append(rec)
                index[rec["id"]] = {"mode": mode, "candidate": c["sha256"],
                                    "strategy": c["strategy"], "base_scenario": s.id,
                                    "family": s.family, "optimized_for": A.optimized_for}
    return records, index


def write_suite(data: dict[str, Any], records: dict[str, list[dict[str, Any]]], seed: int,
                force: bool = False) -> str:
    from containmentbench.scenarios.manifest import render_suite, verify_suite, write_suite_files

    out = suite_path(data)
    files = render_suite(str(out), seed, records)
    return write_suite_files(out, str(out), files, force, check=verify_suite)


def replay_data(data: dict[str, Any], stages: list[str]) -> dict[str, Any]:
    """The study config the replay shards run under: the derived suite, every configured
    defense, the fresh evaluation seeds (study.seeds)."""
    d = copy.deepcopy(data)
    d["study"]["suite"] = str(suite_path(data))
    d["study"]["stages"] = [s for s in d["study"]["stages"] if s in stages]
    d["study"]["scenarios"] = []
    d["study"]["adaptive"] = {**d["study"]["adaptive"], "enabled": False}
    return d


def run_replay(data: dict[str, Any], stages: list[str], quiet: bool = True) -> dict[str, Any]:
    """Every replay job (finished shards are skipped, as in any rollout job)."""
    from containmentbench.models.base import make_backend
    from containmentbench.pipeline.plan import jobs
    from containmentbench.runtime.job import backend_config, run_job

    d = replay_data(data, stages)
    backend = make_backend(backend_config(d))
    done, skipped, errored = [], [], []
    try:
        for job in jobs(d):
            res = run_job(d, job, quiet=quiet, backend=backend)
            done += res.done
            skipped += res.skipped
            errored += res.errored
    finally:
        backend.close()
    if errored:
        from containmentbench.errors import BenchError
        raise BenchError(f"{len(errored)} replay shard(s) errored (first: {errored[0]})",
                         field="backend")
    return {"shards_run": len(done), "shards_skipped": len(skipped)}


def write_index(data: dict[str, Any], index: dict[str, Any]) -> Path:
    from containmentbench.integrity import writer

    path = suite_path(data).parent / INDEX
    writer.write_json(path, json.loads(canonical_json(index)), kind="adaptive-index",
                      once=True)
    return path


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


def build_tables(run: Path, qualification: Path) -> list[Table]:
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
