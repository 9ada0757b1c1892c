"""Study composition (Hydra), validation errors naming the key, shard planning and status."""

from __future__ import annotations

import pytest

from containmentbench.config.compose import config_hash, load_study
from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import model_label, shard_key, shards
from containmentbench.pipeline.snake import overrides_from, split_overrides
from containmentbench.pipeline.status import study_status
from tests.conftest import run_cli


def test_full_main_plan():
    data = load_study(["study=full_main"])
    sh = shards(data)
    assert len(sh) == 4 * 7 * 5  # stages x defenses x seeds (shard_size 200 >= stage size)
    assert sum(len(s.scenario_ids) for s in sh) == 17640
    assert model_label(data) == "sim:default"
    assert sh[0].id == "sim-default/none/seed=1/security/shard-000"


def test_shard_size_splits_blocks():
    data = load_study(["study=full_main", "study.shard_size=50"])
    sec = [s for s in shards(data) if s.stage == "security" and s.defense == "none"
           and s.seed == 1]
    assert [len(s.scenario_ids) for s in sec] == [50, 50, 50, 42]


def test_shard_key_tracks_rollout_inputs_only():
    a = load_study(["study=smoke"])
    b = load_study(["study=smoke", "analysis.resamples=100"])
    c = load_study(["study=smoke", "runtime.max_steps=10"])
    s = shards(a)[0]
    assert shard_key(a, s) == shard_key(b, s) != shard_key(c, s)
    assert config_hash(a) != config_hash(b)


@pytest.mark.parametrize("overrides,field", [
    (["study.bogus=1"], "study.bogus"),
    (["study.shard_size=abc"], "study.shard_size"),
    (["backend=vllm", "model=qwen2_5_7b_instruct", "model.path=/nonexistent/model"],
     "model.path"),
    (["study.stages=[]"], "study.stages"),
    (["study.stages=[nope]"], "study.stages[0]"),
    (["study.seeds=[]"], "study.seeds"),
    (["study.defenses=[none,wat]"], "study.defenses[1]"),
    (["study=nope"], "study"),
    (["model=qwen2_5_7b_instruct"], "model.name"),
])
def test_bad_config_names_the_key(overrides, field):
    with pytest.raises(BenchError) as e:
        load_study(["study=smoke", *overrides])
    assert e.value.field == field
    assert "\n" not in e.value.render()


def test_snakemake_config_overrides():
    assert split_overrides("[a=1,b.c=[1,2],d=x]") == ["a=1", "b.c=[1,2]", "d=x"]
    assert overrides_from({"study": "smoke", "overrides": "[x=1,y=[2,3]]"}) == \
        ["study=smoke", "x=1", "y=[2,3]"]
    # every --config key is an override, the same strings as the CLI's (values Snakemake
    # parsed are written back); a wrong key fails at composition with the right form shown
    assert overrides_from({"study": "smoke", "backend": "vllm", "results_dir": "/r",
                           "flag": True, "overrides": ["study.seeds=[1]"]}) == \
        ["study=smoke", "backend=vllm", "results_dir=/r", "flag=true", "study.seeds=[1]"]
    assert overrides_from({"studdy": "smoke"}) == ["studdy=smoke"]
    with pytest.raises(BenchError, match=r"full key path, e.g. study.seeds=\[1\]"):
        load_study(["studdy=smoke"])


def test_status_and_config_cli(tmp_path, capsys):
    data = load_study(["study=smoke", f"results_dir={tmp_path}", "study.defenses=[none]",
                       "study.seeds=[1]"])
    st = study_status(data)
    assert len(st["missing"]) == 4 and not st["done"]
    first = shards(data)[0]
    assert run_cli("rollout", "--suite", "smoke", "--stage", first.stage, "--scenarios",
                   ",".join(first.scenario_ids), "--defense", "none", "--seed", 1,
                   "--study", "smoke", "--out",
                   tmp_path / "smoke" / "sim-default" / "traces" / first.id,
                   "--quiet") == 0
    st = study_status(data)
    assert st["done"] == [first.id]
    ev = tmp_path / "smoke" / "sim-default" / "traces" / first.id / "events.parquet"
    ev.write_bytes(ev.read_bytes()[:-10] + b"0123456789")
    assert study_status(data)["corrupt"] == [first.id]
    assert run_cli("status", "study=smoke", f"results_dir={tmp_path}", "study.defenses=[none]",
                   "study.seeds=[1]") == 0
    assert "corrupt 1" in capsys.readouterr().out
    assert run_cli("config", "check", "study=full_main") == 0
    assert "140 shards" in capsys.readouterr().out
    assert run_cli("config", "check", "study=full_main", "cluster.cores=x") == 2
