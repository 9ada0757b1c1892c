"""End-to-end checks against a real local Slurm cluster.

Bring one up with ``bash slurm/local_up.sh`` (single node, partition ``debug``, accounting via
slurmdbd), run ``pytest tests/slurm -m slurm``, stop it with ``bash slurm/local_down.sh``.
Tests that need the cluster skip unless ``sinfo`` is on PATH and ``scontrol ping`` reports UP.
Each test stays well under 90 s on a 2-core machine.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CI_PROFILE = REPO / "slurm" / "profile-local-ci"
SUBMIT = REPO / "slurm" / "submit.py"
TEST_BUDGET_S = 85


def _cluster_status() -> tuple[bool, str]:
    if shutil.which("sinfo") is None:
        return False, "sinfo not on PATH"
    try:
        ping = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=15, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, f"scontrol ping failed: {err}"
    if "is UP" not in ping.stdout:
        answer = " ".join((ping.stdout + ping.stderr).replace("*", "").split())
        return False, f"slurmctld not UP: {answer[:200]}"
    return True, ""


_UP, _WHY = _cluster_status()
needs_cluster = pytest.mark.skipif(
    not _UP, reason=f"no local Slurm cluster ({_WHY}); start one with: bash slurm/local_up.sh"
)


def _tail(text: str, n: int = 40) -> str:
    return "\n".join(text.splitlines()[-n:])


@needs_cluster
def test_submitit_round_trip(tmp_path: Path) -> None:
    submitit = pytest.importorskip("submitit")

    def work(x: int) -> dict:
        import os
        import socket

        return {
            "square": x * x,
            "job_id": os.environ.get("SLURM_JOB_ID"),
            "partition": os.environ.get("SLURM_JOB_PARTITION"),
            "host": socket.gethostname(),
        }

    executor = submitit.AutoExecutor(folder=tmp_path / "submitit", cluster="slurm")
    executor.update_parameters(
        name="cb-test-submitit",
        slurm_partition="debug",
        timeout_min=2,
        mem_gb=0.25,
        cpus_per_task=1,
    )
    job = executor.submit(work, 7)
    deadline = time.monotonic() + 75
    while not job.done():
        if time.monotonic() > deadline:
            job.cancel(check=False)
            pytest.fail(f"submitit job {job.job_id} not done after 75 s (state {job.state})")
        time.sleep(0.5)

    result = job.result()
    assert result["square"] == 49
    assert result["job_id"] == str(job.job_id)
    assert result["partition"] == "debug"
    assert Path(job.paths.stdout).exists()


TOY_SNAKEFILE = """\
rule combine:
    input: "a.txt", "b.txt"
    output: "combined.txt"
    shell: "cat {input} > {output} && echo slurm_job=$SLURM_JOB_ID >> {output}"

rule make_a:
    output: "a.txt"
    shell: "echo a > {output}"

rule make_b:
    output: "b.txt"
    shell: "echo b > {output}"
"""


@needs_cluster
def test_snakemake_slurm_executor_toy_workflow(tmp_path: Path) -> None:
    snakemake = VENV_BIN / "snakemake"
    if not snakemake.exists():
        pytest.skip("snakemake is not installed in this environment (pipeline extra)")
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(TOY_SNAKEFILE)

    cmd = [
        str(snakemake),
        "--executor",
        "slurm",
        "--profile",
        str(CI_PROFILE),
        "--snakefile",
        str(snakefile),
        "--directory",
        str(tmp_path),
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=TEST_BUDGET_S, check=False
        )
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        pytest.fail(f"snakemake did not finish in {TEST_BUDGET_S} s:\n{_tail(out)}")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"snakemake exited {proc.returncode}:\n{_tail(log)}"

    assert (tmp_path / "a.txt").read_text() == "a\n"
    assert (tmp_path / "b.txt").read_text() == "b\n"
    combined = (tmp_path / "combined.txt").read_text().splitlines()
    assert combined[:2] == ["a", "b"]
    # The rule ran inside a Slurm job, not locally.
    assert combined[2].startswith("slurm_job=") and combined[2] != "slurm_job=", combined
    assert "submitted with SLURM jobid" in log


def test_submit_dry_run_prints_command() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(SUBMIT),
            "study=smoke",
            "cluster=slurm_local",
            "--profile",
            str(CI_PROFILE),
            "--partition",
            "debug",
            "--time-min",
            "30",
            "--dry-run",
            "--",
            "--forcerun",
            "rollout",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    command = next(line for line in proc.stdout.splitlines() if line.startswith("command:"))
    assert (f"snakemake --profile {CI_PROFILE} --config study=smoke "
            f"'overrides=[cluster=slurm_local]' --forcerun rollout") in command
    assert "slurm_partition=debug" in proc.stdout
    assert "timeout_min=30" in proc.stdout
    assert "nothing submitted" in proc.stdout


def test_submit_bad_arguments_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, str(SUBMIT), "study=smoke", "--time-min", "0", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "--time-min" in proc.stderr


def test_submit_bad_study_config_exit_2_before_submission() -> None:
    proc = subprocess.run(
        [sys.executable, str(SUBMIT), "study=smoke", "study.seeds=x", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "study.seeds" in proc.stderr and "nothing submitted" not in proc.stdout


def test_submit_old_form_gets_the_right_one() -> None:
    """One way to say a study: the old --study/--overrides flags get a one-line error that
    shows the override form (no cluster needed)."""
    proc = subprocess.run(
        [sys.executable, str(SUBMIT), "--study", "smoke", "--overrides", "cluster=slurm",
         "--dry-run"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "python slurm/submit.py study=smoke cluster=slurm" in proc.stderr
