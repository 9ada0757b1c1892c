"""``cross-model`` and ``compare`` refuse runs served differently (models/serving.py) unless
``--differ-in`` names the difference, naming each differing key with both values; two runs of
the simulated agent stay comparable; a multi-model study says its point in
``study.differ_in``."""

from __future__ import annotations

import pytest

from containmentbench.cli import serving_args
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import run_dir
from tests.conftest import run_cli
from tests.models.fake_server import FakeServer

SMALL = ["study=smoke", "study.seeds=[1]", "study.stages=[security]", "study.defenses=[none]"]


def _run(root, *extra):
    data = load_study([*SMALL, f"results_dir={root}", *extra])
    d = run_dir(data)
    save_resolved(data, d / "config.yaml")
    (d / "metrics").mkdir(parents=True)
    (d / "metrics" / "rollout_metrics.parquet").write_bytes(b"")  # never read: refused first
    return d


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs of one model: vLLM 0.6.1 (prompt), 0.7.0 (prompt), 0.7.0 (native)."""
    root = tmp_path_factory.mktemp("served")
    out = {}
    for name, version, mode in (("a", "0.6.1", "prompt"), ("b", "0.7.0", "prompt"),
                                ("c", "0.7.0", "native")):
        with FakeServer(["m"], kind="vllm", version=version) as s:
            out[name] = _run(root / name, "backend=openai", f"base_url={s.base_url}",
                             "model=m", f"backend.tool_mode={mode}")
    return out


def _line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _metrics(*dirs):
    return [str(d / "metrics" / "rollout_metrics.parquet") for d in dirs]


def test_cross_model_refuses_runs_served_differently(runs, tmp_path, capsys):
    out = tmp_path / "cross"
    assert run_cli("cross-model", *_metrics(runs["a"], runs["c"]), "--out", out) == 2
    line = _line(capsys)
    assert "served differently" in line
    assert "engine_version" in line and "'0.6.1'" in line and "'0.7.0'" in line
    assert "tool_mode" in line and "'prompt'" in line and "'native'" in line
    assert "--differ-in engine_version,tool_mode" in line
    assert not (out / "analysis.json").exists()
    # one difference declared: the other is still refused, and named alone
    assert run_cli("cross-model", *_metrics(runs["a"], runs["c"]), "--out", out,
                   "--differ-in", "engine_version") == 2
    line = _line(capsys)
    assert "tool_mode" in line and "engine_version (" not in line


def test_compare_refuses_two_run_dirs_served_differently(runs, capsys):
    args = ["compare", runs["a"], runs["b"], "a=none", "b=none", "metric=committed_harm"]
    assert run_cli(*args) == 2
    line = _line(capsys)
    assert "engine_version" in line and "'0.6.1'" in line and "'0.7.0'" in line
    assert "tool_mode" not in line  # the same in both
    # told the point, the check passes (and the comparison then needs real metrics)
    assert run_cli(*args, "--differ-in", "engine_version") == 2
    assert "served differently" not in _line(capsys)
    assert run_cli(*args, "--differ-in", "engine_versio") == 2
    assert "not a serving record key" in _line(capsys)


def test_declared_differences_pass_and_the_sim_pair_stays_comparable(runs, tmp_path):
    assert serving_args.check_runs([runs["a"], runs["c"]],
                                   ["engine_version", "tool_mode"]) == ["engine_version",
                                                                        "tool_mode"]
    sims = [_run(tmp_path / "s1"), _run(tmp_path / "s2", "model=sim_always_follow")]
    assert serving_args.check_runs(sims, []) == []


def test_a_multi_model_study_says_its_point_in_study_differ_in():
    from containmentbench.pipeline.runs import load_runs

    with FakeServer(["m", "n"], kind="vllm") as s:
        models = ["study=smoke_models", "study.seeds=[1]", f"base_url={s.base_url}",
                  "study.models=[m@openai,n@openai]", "backend.tool_mode=native"]
        assert len(load_runs(models)) == 2  # served alike
    # two engines: refused when the study is composed, before any job, unless declared
    mixed = ["study=smoke_models", "study.seeds=[1]",
             "study.models=[qwen2_5_7b_instruct@hf,mistral_7b_instruct_v0_2@vllm]"]
    with pytest.raises(BenchError, match="served differently") as e:
        load_runs(mixed)
    assert e.value.field == "study.differ_in"
    assert "engine (qwen2_5_7b_instruct: 'transformers'; mistral_7b_instruct_v0_2: 'vllm')" \
        in e.value.detail
    assert len(load_runs([*mixed, "study.differ_in=[engine,engine_version]"])) == 2
    # the sim pair of smoke_models, as today
    assert len(load_runs(["study=smoke_models", "study.seeds=[1]"])) == 2
    with pytest.raises(BenchError, match="not a serving record key") as e:
        load_runs(["study=smoke_models", "study.differ_in=[engine,bogus]"])
    assert e.value.field == "study.differ_in[1]"
