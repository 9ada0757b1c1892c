"""The Snakemake DAG: lint-clean, validated config before anything runs, and the cluster dry
run of full_main with vLLM on Slurm (GPU resources on rollout jobs only, expected count)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SMALL_SMOKE, copy_finished_smoke

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def _run(tmp_path, *args):
    return subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=300)


def test_cluster_dry_run_gpu_on_rollouts_only(tmp_path):
    res = _run(tmp_path, "-n", "--config", "study=full_main",
               f"overrides=[cluster=slurm,backend=vllm,model=qwen2_5_7b_instruct,"
               f"results_dir={tmp_path}/results]")
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:")[1], re.M))
    # one GPU job per seed (cluster.rollout_group=seed): 5 engine loads, not 140
    # + cases, report, audit, and the sensitivity and bootstrap parts
    assert counts["rollout"] == "5" and counts["total"] == "16"
    assert counts["sensitivity"] == counts["bootstrap"] == counts["tables"] == "1"
    blocks = re.split(r"\n(?=rule |localrule )", out)
    seen = {"rollout": 0, "other": 0}
    for b in blocks:
        m = re.match(r"(?:local)?rule (\w+):", b)
        if not m:
            continue
        res_line = re.search(r"resources: (.*)", b)
        resources = res_line.group(1) if res_line else ""
        if m.group(1) == "rollout":
            seen["rollout"] += 1
            assert "gres=gpu:h100:1" in resources and "slurm_partition=gpu" in resources
            assert "mem_mb=64000" in resources and "runtime=240" in resources
        else:
            seen["other"] += 1
            assert "gres" not in resources and "gpu=" not in resources
    assert seen["rollout"] == 5 and seen["other"] >= 5


def test_bad_config_fails_before_any_job(tmp_path):
    res = _run(tmp_path, "-n", "--config", "study=smoke", "overrides=[study.shard_size=abc]")
    assert res.returncode == 2
    # Snakemake's own notice that it applies profiles/default (rerun-incomplete) aside
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()
             and not ln.startswith("Using workflow specific profile")]
    assert lines == ["containmentbench: error: field 'study.shard_size': invalid "
                     "configuration: Value 'abc' of type 'str' could not be converted to "
                     "Integer"]
    assert not (tmp_path / "results").exists()


def test_lint_is_clean(tmp_path):
    res = _run(tmp_path, "--lint", "--config", "study=smoke",
               f"overrides=[results_dir={tmp_path}/results]")
    assert res.returncode == 0
    assert "Congratulations" in res.stdout + res.stderr


def _jobs(out: str) -> dict[str, str]:
    if "Job stats:" not in out:
        return {}
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:")[1], re.M))


@pytest.mark.slow
def test_bootstrap_setting_does_not_rerun_sensitivity(tmp_path, finished_smoke):
    """The sensitivity and bootstrap parts are cached apart: a bootstrap setting reruns
    bootstrap and tables only; a sensitivity setting reruns sensitivity and tables only."""
    copy_finished_smoke(finished_smoke, tmp_path)  # the session's finished small study
    base = f"results_dir=results,{SMALL_SMOKE}"
    res = _run(tmp_path, "-n", "--config", "study=smoke", f"overrides=[{base}]")
    assert "Nothing to be done" in res.stdout + res.stderr
    boot = _run(tmp_path, "-n", "--config", "study=smoke",
                f"overrides=[{base},analysis.resamples=60]")
    jobs = _jobs(boot.stdout + boot.stderr)
    assert "bootstrap" in jobs and "tables" in jobs and "sensitivity" not in jobs, jobs
    assert "metrics" not in jobs and "rollout" not in jobs
    sens = _run(tmp_path, "-n", "--config", "study=smoke",
                f"overrides=[{base},analysis.sensitivity.b=none]")
    jobs = _jobs(sens.stdout + sens.stderr)
    assert "sensitivity" in jobs and "tables" in jobs and "bootstrap" not in jobs, jobs
    # the resolved config changes but no output does (an operational setting here; a new
    # schema default after an upgrade alike): the dry run and the run both re-freeze only,
    # so the manifest never names the old config bytes and verify holds
    run = tmp_path / "results" / "smoke" / "sim-default"
    changed = f"overrides=[{base},cluster.metrics_workers=1]"
    dry = _run(tmp_path, "-n", "--config", "study=smoke", changed)
    assert set(_jobs(dry.stdout + dry.stderr)) == {"freeze", "all", "total"}, dry.stdout[-2000:]
    res = _run(tmp_path, "--cores", "2", "--config", "study=smoke", changed)
    assert res.returncode == 0, res.stderr[-2000:]
    assert set(_jobs(res.stdout + res.stderr)) == {"freeze", "all", "total"}
    verify = subprocess.run([str(Path(sys.executable).parent / "containmentbench"), "verify",
                             str(run)], capture_output=True, text=True, timeout=120)
    assert verify.returncode == 0, verify.stderr
