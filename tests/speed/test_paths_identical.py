"""The faster path gives the same bytes as the per-shard path at the same commit.

The smoke study is run twice: once shard by shard (``rollout --study-config --shard --out``,
one backend per shard, as the pipeline ran before multi-shard jobs) and once as a single
multi-shard job (``cluster.rollout_group=model``: one process, cached suite, one backend,
shards read from the pre-flight's ``plan.json``),
then ``metrics`` and ``analyze`` on each. Traces (rollouts, events, edges), the metrics table
and every table and figure data file must hash the same. Only ``timings.parquet`` (wall
seconds, by design), the job records and the wall-clock tables (``defense_overhead``,
``throughput``) are left out.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from containmentbench.cli.main import main
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.pipeline.plan import run_dir, shards

TRACE_FILES = ("rollouts.parquet", "events.parquet", "edges.parquet")


def _digest(root: Path, names: tuple[str, ...] | None = None) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and (names is None or p.name in names):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


RECORD = ".containmentbench-out"
WALL = ("defense_overhead.", "throughput.")


def _owned(folder: Path) -> list[str]:
    """The files the folder's writer record lists, less the wall-clock tables."""
    import json

    files = json.loads((folder / RECORD).read_text())["files"]
    return sorted(f for f in files if not f.startswith(WALL))


def _run(tmp: Path, group: str, per_shard: bool) -> dict[str, dict[str, str]]:
    data = load_study(["study=smoke", f"results_dir={tmp}", f"cluster.rollout_group={group}"])
    run = run_dir(data)
    cfg = run / "config.yaml"
    save_resolved(data, cfg)
    if per_shard:
        for s in shards(data):
            assert main(["rollout", "--study-config", str(cfg), "--shard", s.id, "--out",
                         str(run / "traces" / s.id), "--quiet"]) == 0
    else:  # the pipeline's path: the pre-flight's plan file, read by the job
        from containmentbench.config.compose import read_resolved
        from containmentbench.pipeline.planfile import read_plan, save_plan

        save_plan(read_resolved(cfg), cfg, shards(read_resolved(cfg)))
        assert read_plan(cfg) is not None
        assert main(["rollout", "--study-config", str(cfg), "--job", "all", "--quiet"]) == 0
    metrics = run / "metrics" / "rollout_metrics.parquet"
    assert main(["metrics", str(run / "traces"), "--out", str(metrics), "--workers", "2"]) == 0
    assert main(["analyze", str(metrics), "--out", str(run), "--config", str(cfg),
                 "--resamples", "200"]) == 0
    return {"traces": _digest(run / "traces", TRACE_FILES),
            "metrics": _digest(run / "metrics"),
            # the defenses' hook time and the job's throughput are wall clock (analysis.json's
            # wall_clock list); throughput exists only where a rollout job ran (the per-shard
            # path writes no job record), so the folder's record of its files is compared
            # without the wall-clock ones
            "tables": {k: v for k, v in _digest(run / "tables").items()
                       if not k.startswith((*WALL, RECORD))},
            "owned": _owned(run / "tables"),
            "figures": {k: v for k, v in _digest(run / "figures").items()
                        if not k.endswith((".png", ".pdf", ".svg"))}}


@pytest.mark.slow
def test_multi_shard_job_matches_per_shard_path(tmp_path):
    per_shard = _run(tmp_path / "a", "shard", per_shard=True)
    one_job = _run(tmp_path / "b", "model", per_shard=False)
    assert len(per_shard["traces"]) == 3 * 56  # 7 defenses x 2 seeds x 4 stages
    assert per_shard["metrics"] and per_shard["tables"]
    for part in per_shard:
        assert per_shard[part] == one_job[part], part


# ------------------------------------------------------------------ the pipeline's own path

# wall-clock measurements, different in every run by design: the rollout timings, the
# audit's cost table (paper 001's overhead per unit of work), the defenses' hook time, the
# jobs' throughput and the report pages showing them
MEASURED = ("timings.parquet", "audit_overhead.", "audit_unit_cost.", "defense_overhead",
            "throughput.",
            "report/index.html")
COMPARED = ("traces", "metrics", "reparse", "analysis", "tables", "figures", "audit", "report")


def _study_digests(run: Path) -> dict[str, str]:
    out = {}
    for sub in COMPARED:  # of a shard: its tables (its record names how it was run)
        for rel, digest in _digest(run / sub, TRACE_FILES if sub == "traces" else None).items():
            path = f"{sub}/{rel}"
            if not any(m in path for m in MEASURED) and not any(
                    part.startswith(".") for part in Path(rel).parts):
                out[path] = digest
    return out


@pytest.mark.slow
def test_snakemake_run_matches_the_serial_reference_path(finished_smoke, tmp_path):
    """The fast path (``snakemake --cores 2``: multi-shard rollout jobs, metrics on two
    workers, the audit beside the analysis chain, priorities) against the reference path (each
    step's CLI verb alone, in order, in this process, one worker, one shard at a time): the
    traces, metrics, reparse, analysis parts, tables, figures, audit and report hash the
    same."""
    from tests.conftest import SMALL_SMOKE_OVERRIDES

    fast = finished_smoke / "results" / "smoke" / "sim-default"
    data = load_study(["study=smoke", f"results_dir={tmp_path}", *SMALL_SMOKE_OVERRIDES])
    run = run_dir(data)
    cfg = run / "config.yaml"
    save_resolved(data, cfg)
    for s in shards(data):
        assert main(["rollout", "--study-config", str(cfg), "--shard", s.id, "--out",
                     str(run / "traces" / s.id), "--quiet"]) == 0
    metrics = run / "metrics" / "rollout_metrics.parquet"
    parts = run / "analysis"
    steps = [
        ["metrics", run / "traces", "--study-config", cfg, "--out", metrics, "--workers", "1"],
        ["reparse", run / "traces", "--out", run / "reparse"],
        ["sensitivity", metrics, "--out", parts / "sensitivity.json", "--config", cfg],
        ["bootstrap", metrics, "--out", parts / "bootstrap.json", "--config", cfg],
        # the audit and the case studies before the analysis, whose results.parquet holds
        # their numbers too
        ["audit", "run", run, "--replay", "auto"],
        ["cases", run],
        ["analyze", metrics, "--out", run, "--config", cfg, "--reparse",
         run / "reparse" / "summary.json", "--sensitivity", parts / "sensitivity.json",
         "--bootstrap", parts / "bootstrap.json"],
        ["report", run, "--before-freeze", "--workers", "1"],
    ]
    for argv in steps:
        assert main([str(a) for a in argv]) == 0, argv[0]
    reference, pipeline = _study_digests(run), _study_digests(fast)
    assert len(reference) > 150 and any(k.startswith("audit/") for k in reference)
    assert any(k.startswith("report/rollouts/") for k in reference)
    assert sorted(reference) == sorted(pipeline)
    assert [k for k in reference if reference[k] != pipeline[k]] == []
