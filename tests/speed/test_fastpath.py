"""The per-process speed-ups keep every result the same: the CLI imports only the invoked
verb and keeps pandas out of the job process; suites and scenario hashes are cached per
process but re-read when a file changes; the shard planner's id index agrees with the
validated suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from containmentbench.canonical import sha256_json
from containmentbench.cli.main import VERBS, _invoked_verb, build_parser
from containmentbench.config.compose import load_study
from containmentbench.pipeline.plan import shards
from containmentbench.scenarios.manifest import load_suite, suite_dir, suite_index


def test_only_the_invoked_verb_is_registered():
    assert _invoked_verb(["rollout", "--help"]) == "rollout"
    assert _invoked_verb(["cross-model", "x"]) == "cross_model"
    assert _invoked_verb(["--help"]) is None and _invoked_verb(["nosuch"]) is None
    sub = next(a for a in build_parser("status")._actions if a.dest == "verb")
    assert set(sub.choices) == {"status"}
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    assert set(sub.choices) >= {"rollout", "metrics", "analyze"} and set(sub.choices) <= set(
        VERBS) | {"show", "report", "cases", "audit", "cross-model"}


def test_job_process_imports_neither_pandas_nor_other_verbs(tmp_path):
    code = ("import sys; from containmentbench.cli.main import main; "
            "rc = main(['rollout', '--suite', 'smoke', '--stage', 'clean', '--defense', "
            f"'none', '--seed', '1', '--out', r'{tmp_path / 'shard'}', '--quiet']); "
            "print(rc, 'pandas' in sys.modules, 'containmentbench.cim.generator' in "
            "sys.modules, 'containmentbench.cli.analyze_cmd' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.split() == ["0", "False", "False", "False"], out.stderr
    assert (tmp_path / "shard" / "SHA256SUMS").exists()


def test_pandas_block_is_lifted_after_the_command(tmp_path):
    from containmentbench.cli.main import main
    from containmentbench.fastpath import _NoPandas

    assert main(["status", str(tmp_path / "nothing")]) in (0, 1, 2)
    assert not any(isinstance(f, _NoPandas) for f in sys.meta_path)


def test_suite_cache_rereads_changed_files(tmp_path):
    src = suite_dir("smoke")
    dst = tmp_path / "smoke"
    shutil.copytree(src, dst)
    first = load_suite(dst)
    assert load_suite(dst) == first and load_suite(dst)[0] is first[0]  # cached objects
    path = dst / "clean.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # drop a scenario: size and mtime change
    os.utime(path, ns=(1, 1))
    again = load_suite(dst, "clean")
    assert len(again) == len([s for s in first if s.stage == "clean"]) - 1
    assert [sid for st, sid in suite_index(dst) if st == "clean"] == [s.id for s in again]


def test_scenario_hash_is_cached_and_unchanged():
    for s in load_suite("smoke"):
        assert s.hash == sha256_json(s.record) == s.hash


def test_planner_index_matches_validated_suite():
    assert suite_index("full_main") == [(s.stage, s.id) for s in load_suite("full_main")]
    data = load_study(["study=smoke"])
    by_stage = {}
    for s in load_suite("smoke"):
        by_stage.setdefault(s.stage, []).append(s.id)
    for sh in shards(data):
        assert set(sh.scenario_ids) <= set(by_stage[sh.stage])


def test_resolved_config_reads_the_same(tmp_path):
    import yaml

    from containmentbench.config.compose import read_resolved, save_resolved

    data = load_study(["study=smoke"])
    save_resolved(data, tmp_path / "config.yaml")
    text = (tmp_path / "config.yaml").read_text()
    assert read_resolved(tmp_path / "config.yaml") == yaml.safe_load(text)
    assert Path(tmp_path / "config.yaml").exists()


def test_packaged_sim_profiles_read_as_omegaconf_reads_them():
    from importlib import resources

    from omegaconf import OmegaConf

    from containmentbench.models.sim import packaged_profiles as _packaged_profiles

    text = resources.files("containmentbench.models").joinpath("sim_profiles.yaml").read_text()
    assert "${" not in text  # no interpolation for libyaml to miss
    assert _packaged_profiles() == OmegaConf.to_container(OmegaConf.create(text))
