"""The study's §4.3 judge through the Snakemake audit rule: an unreachable served judge stops
the run before any job (one line naming the backend, exit 2, nothing written); a reachable
one reruns the audit (and what reads it), is recorded in the summary, and the study still
verifies and reproduces byte for byte."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit.test_study_judge import JudgeServer
from tests.conftest import ROOT, SMALL_SMOKE, copy_finished_smoke

BIN = Path(sys.executable).parent


def _run(tmp_path, *args):
    return subprocess.run([str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "-d",
                           str(tmp_path), *args], capture_output=True, text=True, timeout=300)


def _judge(url: str, model: str = "judge-m") -> str:
    return (f"study.audit.judge={{backend:openai,model:{model},label:fake,"
            f"options:{{base_url:'{url}',max_retries:0}}}}")


def test_unreachable_judge_stops_the_run_before_any_job(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    res = _run(tmp_path, "--cores", "1", "--config", "study=smoke",
               f"overrides=[results_dir={tmp_path}/results,{_judge(url)}]")
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()
             and not ln.startswith("Using workflow specific profile")]
    assert res.returncode == 2 and len(lines) == 1, res.stderr[-2000:]
    assert "'study.audit.judge'" in lines[0] and url in lines[0] and "openai" in lines[0]
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_judge_reruns_the_audit_and_the_study_verifies(tmp_path, finished_smoke) -> None:
    copy_finished_smoke(finished_smoke, tmp_path)
    run = tmp_path / "results" / "smoke" / "sim-default"
    plain = (run / "audit" / "summary.json").read_bytes()
    with JudgeServer(["judge-m"]) as srv:
        over = f"overrides=[results_dir=results,{SMALL_SMOKE},{_judge(srv.base_url)}]"
        res = _run(tmp_path, "--cores", "2", "--config", "study=smoke", over)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "rule audit:" in res.stdout + res.stderr
        summary = json.loads((run / "audit" / "summary.json").read_text())
        assert summary["judge_identity"]["model"] == "judge-m"
        assert summary["judge_identity"]["label"] == "fake"
        assert "judge" in summary["implicit_analysis"]
        again = _run(tmp_path, "-n", "--config", "study=smoke", over)
        assert "Nothing to be done" in again.stdout + again.stderr
        for verb in ("verify", "reproduce"):
            r = subprocess.run([str(BIN / "containmentbench"), verb, str(run)],
                               capture_output=True, text=True, timeout=200)
            assert r.returncode == 0, r.stderr[-2000:]
    # the judge dropped again: the audit is redone as before the key existed
    res = _run(tmp_path, "--cores", "2", "--config", "study=smoke",
               f"overrides=[results_dir=results,{SMALL_SMOKE}]")
    assert res.returncode == 0, res.stderr[-2000:]
    assert (run / "audit" / "summary.json").read_bytes() == plain
