"""One study, many models, never pooled: per-model run directories, the cross-model table,
and one-line refusals of mixed folders and bad model entries."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import model_slug, run_dir, shard_dir, shards
from containmentbench.pipeline.runs import load_runs
from tests.conftest import ROOT, run_cli

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
SMALL = ["study.seeds=[1]", "study.defenses=[none,tool_boundary]", "analysis.resamples=200"]


def test_runs_one_per_model(tmp_path):
    runs = load_runs(["study=smoke_models", f"results_dir={tmp_path}"])
    assert [model_slug(d) for d in runs] == ["sim-default", "sim-always_follow"]
    assert [run_dir(d) for d in runs] == [tmp_path / "smoke_models" / "sim-default",
                                          tmp_path / "smoke_models" / "sim-always_follow"]
    # a one-model study is one run under its model slug
    (one,) = load_runs(["study=smoke", f"results_dir={tmp_path}"])
    assert run_dir(one) == tmp_path / "smoke" / "sim-default"


@pytest.mark.parametrize("overrides,field", [
    (["study.models=[sim,sim]"], "study.models[1]"),
    (["study.models=[sim,nope]"], "study.models[1]"),
    (["study.models=[sim,sim_always_follow@nope]"], "study.models[1]"),
    (["study.models=[sim,qwen2_5_7b_instruct]"], "study.models[1]"),  # sim backend, real model
    (["model=sim_always_follow"], "model"),
    (["cluster.rollout_group=nope"], "cluster.rollout_group"),
])
def test_bad_model_entries_fail_up_front(overrides, field):
    with pytest.raises(BenchError) as e:
        load_runs(["study=smoke_models", *overrides])
    assert e.value.field == field
    assert "\n" not in e.value.render()


def _adhoc_shard(out, profile):
    sid = "sm-sec-0001"
    return run_cli("rollout", "--suite", "smoke", "--stage", "security", "--scenarios", sid,
                   "--defense", "none", "--seed", 1, "--sim-profile", profile,
                   "--out", out, "--quiet")


def test_metrics_refuses_a_folder_with_two_models(tmp_path, capsys):
    traces = tmp_path / "traces"
    assert _adhoc_shard(traces / "a", "default") == 0
    assert _adhoc_shard(traces / "b", "always_follow") == 0
    capsys.readouterr()
    assert run_cli("metrics", traces, "--out", tmp_path / "m.parquet") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to pool" in err[0] and "sim:always_follow" in err[0]
    assert not (tmp_path / "m.parquet").exists()


def test_metrics_refuses_one_model_under_two_configs(tmp_path, capsys):
    from containmentbench.config.compose import load_study
    from containmentbench.pipeline.plan import jobs
    from containmentbench.runtime.job import run_job

    a = load_study(["study=smoke", f"results_dir={tmp_path}", "study.defenses=[none]",
                    "study.seeds=[1]", "study.stages=[security]"])
    b = load_study(["study=smoke", f"results_dir={tmp_path}", "study.defenses=[tool_boundary]",
                    "study.seeds=[1]", "study.stages=[security]", "runtime.max_steps=30"])
    run_job(a, jobs(a)[0], quiet=True)
    run_job(b, jobs(b)[0], quiet=True)  # same run dir, another runtime config
    assert shard_dir(a, shards(a)[0]).parent.parent.parent.parent == \
        shard_dir(b, shards(b)[0]).parent.parent.parent.parent
    assert run_cli("metrics", run_dir(a) / "traces", "--out", tmp_path / "m.parquet") == 2
    assert "another configuration" in capsys.readouterr().err


def test_analyze_refuses_a_pooled_metrics_table(tmp_path, capsys):
    traces = tmp_path / "t"
    assert _adhoc_shard(traces / "a", "default") == 0
    assert run_cli("metrics", traces, "--out", tmp_path / "a.parquet") == 0
    df = pl.read_parquet(tmp_path / "a.parquet")
    pooled = pl.concat([df, df.with_columns(pl.lit("other").alias("model"))])
    pooled.write_parquet(tmp_path / "pooled.parquet")
    assert run_cli("analyze", tmp_path / "pooled.parquet", "--out", tmp_path / "out") == 2
    assert "refusing to pool" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_two_models_two_table_sets_and_a_cross_model_table(tmp_path):
    """Acceptance: two sim profiles in one study through Snakemake."""
    res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                          "--cores", "2", "--config", "study=smoke_models",
                          f"overrides=[results_dir={tmp_path}/results,{','.join(SMALL)}]"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    # feedback on the terminal: each rollout job's progress (not only its log) and, at the
    # end, each model's verified headline, the comparison's sentences and the report paths
    for slug in ("sim-default", "sim-always_follow"):
        assert f"[smoke_models {slug} job seed-1] 32/32 rollouts (100%)" in res.stderr
    for label in ("sim:default", "sim:always_follow"):
        assert f"Headline: study smoke_models, model {label}" in res.stdout
    assert "Cross-model: study smoke_models, models sim:default, sim:always_follow" in \
        res.stdout and "Under none: Committed policy violation (security)" in res.stdout
    assert "cross_model/report/index.html" in res.stdout
    study = tmp_path / "results" / "smoke_models"
    assert sorted(p.name for p in study.iterdir() if not p.name.startswith(".")) == ["cross_model", "sim-always_follow",
                                                      "sim-default"]
    for slug, label in (("sim-default", "sim:default"),
                        ("sim-always_follow", "sim:always_follow")):
        run = study / slug
        assert (run / "MANIFEST.json").exists()
        assert run_cli("verify", run) == 0
        m = pl.read_parquet(run / "metrics" / "rollout_metrics.parquet")
        assert m["model"].unique().to_list() == [label]     # no pooling
        assert m.height == 16 * 2                            # 16 scenarios x 2 defenses
        t9 = pl.read_parquet(run / "tables" / "table09_security_positive_control.parquet")
        assert t9["defense"].to_list() == ["none", "tool_boundary"]  # rows not doubled
        assert t9["n"].to_list() == [4, 4]                   # 4 security scenarios x 1 seed
        cap = (run / "tables" / "table09_security_positive_control.md").read_text()
        assert label in cap and ("sim:always_follow" if slug == "sim-default"
                                 else "sim:default") not in cap
    cross = study / "cross_model"
    t = pl.read_parquet(cross / "tables" / "cross_model_by_defense.parquet")
    assert set(t["defense"]) == {"none", "tool_boundary"}
    assert set(t["models"]) == {"sim:default vs sim:always_follow"}
    assert (t["n"] <= 4).all() and (t["n"] >= 1).all()  # 4 scenarios x 1 seed
    assert run_cli("verify", cross) == 0
    # the comparison's own headline and report, frozen with its tables
    files = json.loads((cross / "MANIFEST.json").read_text())["files"]
    assert {"tables/headline.json", "tables/headline.md", "report/index.html"} <= set(files)
    page = (cross / "report" / "index.html").read_text()
    assert 'id="findings-sim-default"' in page and 'id="findings-sim-always_follow"' in page
    assert (cross / "report" / "figures" / "sim-default.png").exists()
    # every link resolves: inside cross_model/report/ (figures, its own glossary), or to a
    # sibling model's own report of the same study, which is what those links are for
    rep_dir = (cross / "report").resolve()
    hrefs = {html.unescape(u).split("#")[0]
             for u in re.findall(r'(?:href|src)="([^"]*)"', page)} - {""}
    assert "glossary.html" in hrefs and (rep_dir / "glossary.html").is_file()
    for u in hrefs:
        target = (rep_dir / u).resolve()
        assert target.is_file(), u
        assert rep_dir in target.parents or any(
            (study / m / "report").resolve() in target.parents
            for m in ("sim-default", "sim-always_follow")), u
    # snakemake reproduce prints its verdict on the terminal, not only in its log
    rep = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                          "--cores", "2", "reproduce", "--config", "study=smoke_models",
                          f"overrides=[results_dir={tmp_path}/results,{','.join(SMALL)}]"],
                         capture_output=True, text=True, timeout=600)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert rep.stdout.count(": reproduced: ") + rep.stderr.count(": reproduced: ") == 2
    assert "cross-model files byte-identical" in rep.stdout + rep.stderr
    assert run_cli("cross-model", "--reproduce", "--out", cross) == 0
    md = cross / "tables" / "cross_model_by_defense.md"
    md.write_text(md.read_text().replace("tie", "win", 1))
    assert run_cli("cross-model", "--reproduce", "--out", cross) == 1
    assert run_cli("verify", cross) == 1
    # a second run does no work
    again = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                            "--cores", "2", "-n", "--config", "study=smoke_models",
                            f"overrides=[results_dir={tmp_path}/results,{','.join(SMALL)}]"],
                           capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in again.stdout + again.stderr
    shutil.rmtree(tmp_path / "results")
