"""Known keys and distinct entries of the study config (config/keys.py), at composition, in a
run's config.yaml and in an analysis option file."""

from __future__ import annotations

import copy

import pytest
import yaml

from containmentbench.config.compose import load_study, read_resolved
from containmentbench.config.keys import check_analysis, check_distinct, check_known
from containmentbench.config.loader import load_option
from containmentbench.errors import BenchError


@pytest.fixture(scope="module")
def smoke():
    return load_study(["study=smoke"])


@pytest.mark.parametrize("override,field", [
    ("+study.foo=1", "study.foo"),
    ("+study.adaptive.rootz=1", "study.adaptive.rootz"),
    ("+study.adapter.suitez=[x]", "study.adapter.suitez"),
    ("+defenses.none.familly=x", "defenses.none.familly"),
    ("+analysis.resample=10", "analysis.resample"),
    ("+analysis.sweep.baselines=none", "analysis.sweep.baselines"),
    ("+runtime.max_step=3", "runtime.max_step"),
    ("+cluster.gpu=1", "cluster.gpu"),
])
def test_unknown_plus_keys_refused_at_composition(override, field):
    with pytest.raises(BenchError) as e:
        load_study(["study=smoke", override])
    assert e.value.field == field


def test_open_sections_keep_their_data_keys(smoke):
    # a defense's params are its policy's data; backend options are checked by their backend
    data = load_study(["study=smoke", "+defenses.none.params.note=1"])
    assert data["defenses"]["none"]["params"]["note"] == 1
    with pytest.raises(BenchError) as e:
        load_study(["study=smoke", "+backend.options.bogus=1"])
    assert e.value.field == "backend.options.bogus"


def test_suggestion_for_a_near_miss():
    with pytest.raises(BenchError, match="did you mean 'resamples'"):
        load_study(["study=smoke", "+analysis.resample=10"])


@pytest.mark.parametrize("key,value,field", [
    ("seeds", [1, 2, 1], "study.seeds[2]"),
    ("defenses", ["none", "tool_boundary", "none"], "study.defenses[2]"),
    ("stages", ["clean", "clean"], "study.stages[1]"),
    ("scenarios", ["sm-sec-0001", "sm-sec-0001"], "study.scenarios[1]"),
])
def test_duplicates_refused(key, value, field, smoke):
    data = copy.deepcopy(smoke)
    data["study"][key] = value
    with pytest.raises(BenchError, match="listed twice") as e:
        check_distinct(data)
    assert e.value.field == field
    check_distinct(smoke)
    check_known(smoke)


def test_sim_profile_checked_at_composition():
    with pytest.raises(BenchError, match="unknown sim profile") as e:
        load_study(["study=smoke", "model.sim_profile=nope"])
    assert e.value.field == "model.sim_profile"
    assert load_study(["study=smoke", "model=sim_always_follow"])


@pytest.mark.parametrize("edit,field", [
    (lambda a: a.pop("comparisons"), "analysis.comparisons"),
    (lambda a: a.update(resamples="10"), "analysis.resamples"),
    (lambda a: a["comparisons"][0].update(clam=True), "analysis.comparisons[0].clam"),
    (lambda a: a["sweep"].pop("baseline"), "analysis.sweep.baseline"),
    (lambda a: a.update(seed_variance=[]), "analysis.seed_variance"),
])
def test_analysis_section(edit, field, smoke):
    a = copy.deepcopy(smoke["analysis"])
    edit(a)
    with pytest.raises(BenchError) as e:
        check_analysis(a)
    assert e.value.field == field


def test_run_config_yaml(smoke, tmp_path):
    p = tmp_path / "config.yaml"
    bad = copy.deepcopy(smoke)
    bad["study"]["seeds"] = [3, 3]
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(BenchError) as e:
        read_resolved(p)
    assert e.value.file == str(p) and e.value.field == "study.seeds[1]"
    bad = copy.deepcopy(smoke)
    bad["analysis"]["resample"] = 3
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(BenchError) as e:
        read_resolved(p)
    assert e.value.field == "analysis.resample"
    p.write_text(yaml.safe_dump(smoke))
    assert read_resolved(p) == smoke


def test_analysis_option_file(tmp_path):
    assert load_option("analysis", "default")["resamples"] > 0
    p = tmp_path / "a.yaml"
    p.write_text("resamples: [1,\n")
    with pytest.raises(BenchError, match="not valid YAML") as e:
        load_option("analysis", str(p))
    assert e.value.file == str(p) and e.value.line == 2
    p.write_text("resamples: 5\n")
    with pytest.raises(BenchError) as e:
        load_option("analysis", str(p))
    assert e.value.file == str(p) and e.value.field == "analysis.confidence"


def test_a_backend_and_a_model_of_the_other_kind_are_refused(capsys):
    """A real backend asked to serve the simulated agent, and the sim backend asked for a
    real model: one line naming model.name, exit 2, before anything runs."""
    from tests.conftest import run_cli

    for args in (("backend=vllm", "model=sim"), ("backend=openai", "model=sim"),
                 ("backend=hf", "model=sim_always_follow"),
                 ("backend=sim", "model=qwen2_5_coder_1_5b_instruct")):
        assert run_cli("config", "check", "study=smoke", *args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "field 'model.name'" in err[0], (args, err)
