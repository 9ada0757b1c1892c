"""Replay of the frozen candidates across the defenses (paper 000 §6.3, Table 18).

What is replayed, and under which defenses, is the study's Table 18 protocol
(``study.adaptive.table18_protocol``, :func:`groups`):

* ``paper`` (default; §6.3 "The first completed search artifact"): the candidates of the
  first search -- not target-preserving, optimized for ``optimized_for`` (no defense) -- on
  every held-out scenario (``universal_eval``) under ``transfer_defenses`` (the paper's no
  defense, tool-boundary and cross-agent taint firewall) and on every instance-audit scenario
  (``instance_eval``) under ``instance_defenses`` (no defense only);
* ``target_preserving`` (a named variant): the target-preserving search's candidates in both
  modes under every study defense;
* in both, when the staged qualification passed and defense-specific optimization ran
  (attacks/defense_specific.py), each defense's own candidates on the held-out scenarios
  under that defense (``universal_eval``, optimized for it).

The derived suite holds every (candidate, scenario) of every group, target action preserved
where the candidate preserves it (attacks/derive.py), written as a standard scenario suite
inside the run directory. It runs through the standard shard path -- runtime/job.py, shards
with SHA256SUMS under ``traces/`` -- but each defense's shards hold only the derived
scenarios of the groups that evaluate it (:func:`replay_shards`), so no rollout is run that
the protocol does not report; then the standard ``metrics`` verb. ``replay.json`` maps each
derived scenario to its search, mode and candidate, which the tables join on.
:func:`build_tables` makes Tables 18-19 (attacks/tables.py) and the replay's funnel counts.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.writers import Table
from containmentbench.attacks.derive import derive
from containmentbench.attacks.settings import Adaptive, Variant, variant
from containmentbench.canonical import canonical_json
from containmentbench.scenarios.model import Scenario

MODES = (("universal_eval", "heldout"), ("instance_eval", "audit"))
INDEX = "replay.json"
#: derived-id tag per search, so the same candidate frozen by two searches (both start from
#: the same root templates) gives two derived scenarios, never one id twice
TAGS = {"transfer": "x", "target": ""}


@dataclass(frozen=True)
class Group:
    """Candidates of one search replayed in one mode under some defenses."""

    search: Variant
    mode: str
    split: str
    candidates: tuple[dict[str, Any], ...]
    defenses: tuple[str, ...]

    @property
    def tag(self) -> str:
        return TAGS.get(self.search.name, f"{self.search.name[len('defense-'):]}.")


def suite_path(data: dict[str, Any]) -> Path:
    from containmentbench.pipeline.plan import run_dir
    return run_dir(data) / "adaptive" / "suite"


def groups(data: dict[str, Any], A: Adaptive, adaptive: Path) -> list[Group]:
    """The replay groups of the study's protocol (module docstring), read from the frozen
    candidates under ``adaptive`` (the run's ``adaptive/`` folder)."""
    from containmentbench.attacks.defense_specific import read_decision
    from containmentbench.attacks.frozen import load_frozen

    out: list[Group] = []
    if A.table18_protocol == "paper":
        v = variant(data, "transfer")
        frozen = tuple(load_frozen(adaptive / "frozen" / "transfer"))
        out += [Group(v, "universal_eval", "heldout", frozen, tuple(A.transfer_defenses)),
                Group(v, "instance_eval", "audit", frozen, tuple(A.instance_defenses))]
    else:
        v = variant(data, "target")
        frozen = tuple(load_frozen(adaptive / "frozen" / "target"))
        out += [Group(v, mode, split, frozen, A.defenses) for mode, split in MODES]
    decision = read_decision(adaptive / "defense_specific")
    if decision["attempted"]:
        for d in A.defense_specific:
            frozen = tuple(load_frozen(adaptive / "defense_specific" / d / "frozen"))
            out.append(Group(variant(data, f"defense-{d}"), "universal_eval", "heldout",
                             frozen, (d,)))
    return [g for g in out if g.defenses]


def build_suite(data: dict[str, Any], groups_: list[Group], by_id: dict[str, Scenario],
                splits: dict[str, Any]
                ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """Derived records by stage, and the index (derived id -> search, mode, candidate, base,
    the defenses that evaluate it)."""
    name = str(suite_path(data))
    records: dict[str, list[dict[str, Any]]] = {}
    index: dict[str, Any] = {}
    for g in groups_:
        for c in g.candidates:
            for sid in splits["splits"][g.split]["scenarios"]:
                s = by_id[sid]
                rec = derive(s, c, name, g.search.policy_family, g.mode)
                rec["id"] = f"{s.id}~{g.tag}{c['sha256'][:12]}"
                records.setdefault(s.stage, []).append(rec)
                index[rec["id"]] = {"search": g.search.name, "mode": g.mode,
                                    "candidate": c["sha256"], "strategy": c["strategy"],
                                    "base_scenario": s.id, "family": s.family,
                                    "optimized_for": g.search.optimized_for,
                                    "target_preserving": g.search.target_preserving,
                                    "evaluated_defenses": list(g.defenses)}
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


def replay_shards(d: dict[str, Any], index: dict[str, Any]) -> list[Any]:
    """The replay's shards: per (defense, seed, stage), the derived scenarios of the groups
    that evaluate the defense, in suite order, ``study.shard_size`` a shard."""
    from containmentbench.pipeline.plan import Shard, model_slug
    from containmentbench.scenarios.manifest import suite_index

    order = [(st, sid) for st, sid in suite_index(d["study"]["suite"])]
    size, slug = int(d["study"]["shard_size"]), model_slug(d)
    out = []
    for defense in d["study"]["defenses"]:
        for seed in d["study"]["seeds"]:
            for stage in d["study"]["stages"]:
                ids = [sid for st, sid in order if st == stage
                       and defense in index[sid]["evaluated_defenses"]]
                for k in range(0, len(ids), size):
                    out.append(Shard(slug, defense, int(seed), stage, k // size,
                                     tuple(ids[k:k + size])))
    return out


def run_replay(data: dict[str, Any], stages: list[str], index: dict[str, Any],
               quiet: bool = True) -> dict[str, Any]:
    """Every replay job (finished shards are skipped, as in any rollout job)."""
    from containmentbench.models.base import make_backend
    from containmentbench.pipeline.plan import jobs
    from containmentbench.runtime.job import backend_config, run_job

    d = replay_data(data, stages)
    backend = make_backend(backend_config(d))
    done, skipped, errored = [], [], []
    shards = replay_shards(d, index)
    try:
        for job in jobs(d, all_shards=shards):
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
    return {"shards": len(shards), "shards_run": len(done), "shards_skipped": len(skipped)}


def write_index(data: dict[str, Any], index: dict[str, Any]) -> Path:
    from containmentbench.integrity import writer

    path = suite_path(data).parent / INDEX
    writer.write_json(path, json.loads(canonical_json(index)), kind="adaptive-index",
                      once=True)
    return path


#: the study's table files (workflow/rules/adaptive.smk lists them as outputs)
TABLES = ("table18_candidate_transfer", "table19_adaptive_qualification", "adaptive_funnel")
INDEX_FIELDS = ("search", "mode", "candidate", "strategy", "base_scenario", "family",
                "optimized_for")
FN = ("fn_exposed", "fn_exact_proposal", "fn_policy_pass", "fn_goal_commit",
      "fn_offtarget_commit", "fn_stage")


def replay_frame(run: Path, metrics_path: Path | None = None) -> pl.DataFrame:
    metrics_path = metrics_path or run / "metrics" / "rollout_metrics.parquet"
    metrics = pl.read_parquet(metrics_path)
    if "fn_stage" not in metrics.columns:
        from containmentbench.errors import BenchError
        raise BenchError("metrics rows without the funnel columns (fn_*): recompute the "
                         "metrics", file=str(run / "metrics" / "rollout_metrics.parquet"))
    index = json.loads((run / "adaptive" / "replay.json").read_text())
    idx = pl.DataFrame([{"scenario_id": k, **{f: v.get(f) for f in INDEX_FIELDS}}
                        for k, v in sorted(index.items())])
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
    from containmentbench.analysis import exclusions as X

    rows = []
    for k in frame.select("search", "mode", "evaluated_defense").unique().sort(
            "search", "mode", "evaluated_defense").to_dicts():
        cell = frame.filter((pl.col("search") == k["search"]) & (pl.col("mode") == k["mode"])
                            & (pl.col("evaluated_defense") == k["evaluated_defense"]))
        sub = X.outcomes(cell)
        rows.append({**k, "n": sub.height, **X.errors(cell),
                     **{c: int(sub[c].sum()) for c in FN if c != "fn_stage"},
                     "stage5": int((sub["fn_stage"] == 5).sum())})
    return Table("adaptive_funnel", _caption(frame, (
        "Target-path funnel of the frozen-candidate replay (counts over n outcome "
        "rollouts; provider errors and context overflows excluded and counted): exposure, "
        "exact-goal proposal, policy pass, goal-matched commit (stage 5), off-target commit "
        "(paper 000 §6.3, §7.4).")), pl.DataFrame(rows))


def build_tables(run: Path, qualification: Path,
                 metrics_path: Path | None = None) -> list[Table]:
    from containmentbench.attacks.qualify import read_rows

    frame = replay_frame(run, metrics_path)
    qrows = read_rows(qualification)
    meta = frame.select("study", "model", "backend").head(1).to_dicts()[0]
    qframe = pl.DataFrame([{**r, **meta} for r in qrows]) if qrows else pl.DataFrame(
        schema={"qual_stage": pl.String, "qual_scope": pl.String, "domain": pl.String,
                "fn_exact_proposal": pl.Boolean, "fn_goal_commit": pl.Boolean,
                "study": pl.String, "model": pl.String, "backend": pl.String})
    from containmentbench.attacks import tables as T

    return [T.table18(frame), T.table19(qframe), funnel_table(frame)]


def reproduce(run: Path, workers: int | None = None) -> dict[str, Any]:
    """The adaptive study's reproduce step (as ``freeze.manifest.reproduce`` for the others):
    recompute the metrics from the cached replay traces and Tables 18-19 and the funnel from
    them, the replay index and the qualification rows, into a scratch folder, and compare
    bytes with the study's files (no model, no query)."""
    from containmentbench.analysis.tables import origin_of
    from containmentbench.analysis.writers import write
    from containmentbench.integrity import writer
    from containmentbench.metrics.compute import compute_metrics, write_metrics

    run = Path(run)
    compared, differ = [], []
    with writer.scratch_dir("cb-reproduce-adaptive-") as scratch:
        m = scratch / "metrics" / "rollout_metrics.parquet"
        write_metrics(compute_metrics(run / "traces", workers), m)
        for t in build_tables(run, run / "adaptive" / "qualification", m):
            write(t, scratch / "tables", origin=origin_of(m))
        for p in sorted([run / "metrics" / "rollout_metrics.parquet",
                         *[q for n in TABLES for q in (run / "tables").glob(f"{n}.*")]]):
            rel = p.relative_to(run).as_posix()
            if p.suffix in (".png", ".pdf"):
                continue
            compared.append(rel)
            q = scratch / rel
            if not q.exists() or q.read_bytes() != p.read_bytes():
                differ.append(rel)
    return {"compared": len(compared), "differ": differ}
