"""The plan file beside the resolved config (pipeline/planfile.py) and the per-scenario loader
(manifest.load_scenarios): a job gets exactly the shards and scenarios the slow path gives,
and a plan that no longer matches its config or suite is ignored, never trusted."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pytest

from containmentbench.config.compose import load_study, read_resolved, save_resolved
from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import jobs, shards
from containmentbench.pipeline.planfile import PLAN_FILE, read_plan, save_plan
from containmentbench.scenarios.manifest import load_scenarios, load_suite, suite_dir


def _study(tmp_path: Path, suite: str = "smoke", extra: tuple[str, ...] = ()) -> Path:
    data = load_study(["study=smoke", f"study.suite={suite}", f"results_dir={tmp_path}",
                       *extra])
    cfg = tmp_path / "run" / "config.yaml"
    save_resolved(data, cfg)
    save_plan(read_resolved(cfg), cfg, shards(read_resolved(cfg)))
    return cfg


def test_plan_gives_the_same_config_shards_and_jobs(tmp_path):
    cfg = _study(tmp_path)
    data, planned = read_plan(cfg)
    slow = read_resolved(cfg)
    assert data == slow
    assert planned == shards(slow)
    assert [j.shards for j in jobs(data, planned)] == [j.shards for j in jobs(slow)]


def test_plan_is_ignored_when_config_or_suite_changes(tmp_path, monkeypatch):
    suite = tmp_path / "suites" / "smoke"
    shutil.copytree(suite_dir("smoke"), suite)
    cfg = _study(tmp_path, str(suite))
    assert read_plan(cfg) is not None
    # another config under the same name: the plan belongs to the old bytes
    text = cfg.read_text()
    cfg.write_text(text.replace("shard_size: ", "shard_size: 1", 1))
    assert read_plan(cfg) is None
    cfg.write_text(text)
    assert read_plan(cfg) is not None
    # a stage file edited without a new manifest
    stage = suite / "clean.jsonl"
    stage.write_text("".join(stage.read_text().splitlines(keepends=True)[:-1]))
    assert read_plan(cfg) is None
    # a damaged plan is ignored
    cfg.with_name(PLAN_FILE).write_text("{not json")
    assert read_plan(cfg) is None


def test_load_scenarios_validates_only_what_is_asked(tmp_path):
    full = {s.id: s for s in load_suite("smoke", "clean")}
    ids = list(full)[::-1][:3]
    got = load_scenarios("smoke", "clean", ids)
    assert [s.id for s in got] == ids and all(g == full[g.id] for g in got)
    with pytest.raises(BenchError, match="unknown scenario id 'nope'"):
        load_scenarios("smoke", "clean", ["nope"])
    # a broken record that is not asked for does not stop the job; asked for, it is named
    suite = tmp_path / "smoke"
    shutil.copytree(suite_dir("smoke"), suite)
    path = suite / "clean.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    broken = lines[-1].replace('"stage":"clean"', '"stage":"elsewhere"')
    path.write_text("".join(lines[:-1]) + broken)
    # a suite whose manifest pins these bytes (an edited file alone is refused up front:
    # scenarios/manifest.py check_stage_files)
    import hashlib
    import json

    man = json.loads((suite / "MANIFEST.json").read_text())
    man["stages"]["clean"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (suite / "MANIFEST.json").write_text(json.dumps(man, indent=2, sort_keys=True) + "\n")
    first_id = next(iter(full))
    first = load_scenarios(suite, "clean", [first_id])
    assert first[0].id == first_id
    last_id = list(full)[-1]
    with pytest.raises(BenchError) as exc:
        load_scenarios(suite, "clean", [last_id])
    assert f"line {len(lines)}" in exc.value.render() or str(len(lines)) in exc.value.render()


def test_cli_restores_gc_thresholds(tmp_path):
    from containmentbench.cli.main import main

    before = gc.get_threshold()
    main(["status", str(tmp_path / "nothing")])
    assert gc.get_threshold() == before


def test_plan_hands_the_sim_profile_over_in_file_order(tmp_path, monkeypatch):
    """The job's sim profile comes from the plan (no YAML parser in the job), equal to the
    packaged file's, weights in the file's order (the seeded choices walk that order)."""
    from containmentbench.models import sim

    cfg = _study(tmp_path)
    monkeypatch.setattr(sim, "_PRIMED", {})
    read_plan(cfg)
    assert "default" in sim._PRIMED
    primed = sim.load_profile("default")
    monkeypatch.setattr(sim, "_PRIMED", {})
    parsed = sim.load_profile("default")
    assert primed == parsed
    for field in ("follow", "topology", "formats", "final_formats"):
        assert list(getattr(primed, field)) == list(getattr(parsed, field)), field
    # a changed packaged file: the primed copy is not used
    monkeypatch.setattr(sim, "_PRIMED", {"default": ("0" * 64, {"follow": {}})})
    assert sim.load_profile("default") == parsed
