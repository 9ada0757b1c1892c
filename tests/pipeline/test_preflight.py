"""The pre-flight split in two (pipeline/preflight.py): the check made while the Snakefile is
parsed writes nothing and asks for the next marker generation of a job to be redone; the
changes (quarantine, retire, restore) wait for ``apply``, which only a real run makes.
Also what the study's plan means: metrics and status read the plan, not the folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from containmentbench.config.compose import load_study, save_resolved
from containmentbench.pipeline.plan import (
    job_by_name,
    job_marker,
    jobs,
    run_dir,
    shard_dir,
    split_generation,
)
from containmentbench.pipeline.preflight import apply, check_run, report
from containmentbench.pipeline.status import study_status
from containmentbench.runtime.job import run_job
from containmentbench.trace.io import CHECKSUMS, shard_dirs
from tests.conftest import run_cli

SMALL = ("study=smoke", "study.seeds=[1]", "study.stages=[security]")


def _study(results: Path, defenses: str = "[none,tool_boundary]") -> dict:
    return load_study([*SMALL, f"results_dir={results}", f"study.defenses={defenses}"])


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-job run (two shards) to copy from."""
    results = tmp_path_factory.mktemp("preflight") / "results"
    data = _study(results)
    (job,) = jobs(data)
    assert not run_job(data, job, quiet=True).errored
    return results


@pytest.fixture()
def results(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(finished, out)
    return out


def test_marker_generations_name_the_job():
    assert split_generation("seed-1") == ("seed-1", 0)
    assert split_generation("none.seed-1.security.shard-000.redo-12") == \
        ("none.seed-1.security.shard-000", 12)
    assert split_generation("seed-1.redo-0") == ("seed-1.redo-0", 0)  # not a generation
    data = _study(Path("/tmp/unused"))
    job = job_by_name(data, "seed-1.redo-2")
    assert (job.name, job.generation, job.wildcard) == ("seed-1", 2, "seed-1.redo-2")
    assert job_marker(data, job).name == "seed-1.redo-2.done"


def test_check_writes_nothing_then_apply_quarantines_and_the_redo_is_stable(results, capsys):
    data = _study(results)
    (job,) = jobs(data)
    bad = job.shards[0]
    ev = shard_dir(data, bad) / "events.parquet"
    raw = bytearray(ev.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    ev.write_bytes(bytes(raw))
    before = _snapshot(results)
    check = check_run(data, jobs(data))
    report(check, dryrun=True)
    assert _snapshot(results) == before  # bytes and mtimes: the check only reads
    assert list(check.corrupt) == [bad.id] and check.corrupt[bad.id] == ["events.parquet"]
    (redo,) = check.redo
    assert redo.generation == 1 and not job_marker(data, redo).exists()
    err = capsys.readouterr().err
    assert f"corrupt shard {bad.id}" in err and "a real run moves it" in err
    assert "runs again as seed-1.redo-1" in err

    apply(data, check)
    assert (run_dir(data) / "quarantine" / f"{bad.id}.0" / "events.parquet").is_file()
    assert not shard_dir(data, bad).exists()
    res = run_job(data, redo, quiet=True)
    assert res.done == [bad.id] and job_marker(data, redo).exists()
    again = check_run(data, jobs(data))
    assert not again.redo and not again.corrupt and again.jobs[0].generation == 1


def test_stale_shard_bumps_the_generation(results):
    data = _study(results)
    changed = load_study([*SMALL, f"results_dir={results}", "study.defenses=[none,tool_boundary]",
                          "runtime.max_steps=7"])
    check = check_run(changed, jobs(changed))
    assert len(check.stale) == 2 and check.redo[0].generation == 1
    assert check_run(data, jobs(data)).redo == []  # unchanged settings: nothing to redo


def test_dropped_shards_are_not_read_then_retired_and_restored(results, tmp_path, capsys):
    both = _study(results)
    only = _study(results, "[none]")
    dropped = [s.id for s in jobs(both)[0].shards if s.defense == "tool_boundary"]
    st = study_status(only)
    assert st["dropped"] == dropped and len(st["done"]) == 1
    assert run_cli("status", "study=smoke", *SMALL[1:], f"results_dir={results}",
                   "study.defenses=[none]") == 0
    assert "1 shard(s) on disk are no longer part of the study" in capsys.readouterr().out

    # metrics with the study's config read the shards its plan lists, nothing else
    cfg = run_dir(only) / "config.yaml"
    save_resolved(only, cfg)
    out = tmp_path / "m.parquet"
    assert run_cli("metrics", run_dir(only) / "traces", "--study-config", cfg,
                   "--out", out) == 0
    assert set(pq.read_table(out, columns=["defense"]).column("defense").to_pylist()) == \
        {"none"}

    check = check_run(only, jobs(only))
    assert check.dropped == dropped and not check.redo
    apply(only, check)
    traces = run_dir(only) / "traces"
    assert [d.relative_to(traces).as_posix() for d in shard_dirs(traces)] == \
        [s.id for s in jobs(only)[0].shards]
    assert (run_dir(only) / "retired" / f"{dropped[0]}.0" / CHECKSUMS).is_file()
    assert study_status(only)["dropped"] == []

    # the defense comes back: its intact retired copy is moved back, not recomputed
    check = check_run(both, jobs(both))
    assert list(check.restore) == dropped and check.redo[0].generation == 1
    apply(both, check)
    res = run_job(both, check.redo[0], quiet=True)
    assert res.done == [] and len(res.skipped) == 2


def test_config_in_its_run_dir_records_no_results_dir(results, tmp_path):
    """config.yaml and plan.json tie a study to no machine: a copied run reads its own
    folder, and the config's bytes do not depend on results_dir."""
    from containmentbench.config.compose import read_resolved, resolved_text
    from containmentbench.pipeline.plan import shards
    from containmentbench.pipeline.planfile import read_plan, save_plan

    data = _study(results)
    cfg = run_dir(data) / "config.yaml"
    save_resolved(data, cfg)
    save_plan(data, cfg, shards(data))
    assert "results_dir" not in cfg.read_text()
    assert read_resolved(cfg)["results_dir"] == str(results)
    other = tmp_path / "elsewhere" / "results"
    shutil.copytree(results, other)
    moved = _study(other)
    copied = run_dir(moved) / "config.yaml"
    assert resolved_text(moved, copied) == cfg.read_text()
    assert read_resolved(copied)["results_dir"] == str(other)
    planned = read_plan(copied)
    assert planned is not None and planned[0]["results_dir"] == str(other)
    # elsewhere than its run directory, a config keeps its results_dir (and needs it)
    loose = tmp_path / "loose.yaml"
    save_resolved(data, loose)
    assert read_resolved(loose)["results_dir"] == str(results)


def test_adapter_run_repair_moves_corrupt_shards_and_derived_outputs(results):
    """Adapter studies have no job markers: a real run's pre-flight moves a corrupt shard and
    the all-shard outputs aside (kept) so Snakemake redoes them."""
    from containmentbench.pipeline.preflight import repair_adapter_run

    data = _study(results)
    sh = jobs(data)[0].shards
    (shard_dir(data, sh[1]) / CHECKSUMS).write_text("")
    derived = run_dir(data) / "metrics" / "rollout_metrics.parquet"
    derived.parent.mkdir(parents=True)
    derived.write_bytes(b"metrics")
    assert repair_adapter_run(data, list(sh)) == [sh[1].id]
    quarantine = run_dir(data) / "quarantine"
    assert (quarantine / f"{sh[1].id}.0" / CHECKSUMS).is_file()
    assert (quarantine / "derived.0" / "metrics" / "rollout_metrics.parquet").is_file()
    assert not derived.exists() and (shard_dir(data, sh[0]) / CHECKSUMS).is_file()
