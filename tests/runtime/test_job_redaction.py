"""The rollout job keeps secrets out of what it writes about an errored shard (issue 22).

A backend's error text may hold what a hostile server echoed; the job redacts it again where
it writes ``logs/errored/<shard>.json`` and the job log, with the key named by
``backend.options.api_key_env``.
"""

from __future__ import annotations

import json

from containmentbench.config.compose import load_study
from containmentbench.models.base import Completion
from containmentbench.pipeline.plan import errored_marker, jobs
from containmentbench.runtime.job import run_job

KEY = "sk-job-0123456789abcdef"


class _EchoingBackend:
    """Every call fails with an error text that holds the key (as if nothing redacted it)."""

    name = "openai"
    seed_supported = False

    def generate(self, requests):
        return [Completion(text="", error=f"HTTP 500: you sent Authorization: Bearer {KEY} "
                                          f"and {KEY} again") for _ in requests]

    def close(self):
        pass


def test_errored_record_and_log_hold_no_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CB_JOB_KEY", KEY)
    from tests.models.fake_server import FakeServer

    with FakeServer(["Qwen/Qwen2.5-7B-Instruct"]) as server:  # asked at composition
        data = load_study(["study=smoke", f"results_dir={tmp_path / 'r'}", "backend=openai",
                           "model=qwen2_5_7b_instruct", "study.stages=[security]",
                           "study.defenses=[none]", "study.seeds=[1]",
                           f"base_url={server.base_url}",
                           "++backend.options.api_key_env=CB_JOB_KEY"])
    (job,) = jobs(data)
    res = run_job(data, job, quiet=True, backend=_EchoingBackend())
    (s,) = job.shards
    assert res.errored == [s.id]
    record = json.loads(errored_marker(data, s).read_text())
    assert record["first_error"].startswith("HTTP 500: you sent Authorization: [redacted]")
    err = capsys.readouterr().err
    assert "errored" in err and "[redacted]" in err
    assert KEY not in json.dumps(record) and KEY not in err
