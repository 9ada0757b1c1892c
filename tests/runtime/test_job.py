"""Rollout jobs: one backend load for many shards, the shard still the unit of rerun.

* the job path, the per-shard path and the asynchronous driver give byte-identical sim traces;
* a rerun skips finished shards and redoes only the missing one (a killed job);
* operational options (port, concurrency, timeouts, retries) do not enter the shard key;
* errors are never outcomes: a shard run against a dead server fails without SHA256SUMS,
  ``status`` lists it as errored, and a rerun with the server up completes it.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from containmentbench.config.compose import load_study, save_resolved
from containmentbench.models.base import make_backend
from containmentbench.pipeline.plan import (
    job_marker,
    jobs,
    run_dir,
    shard_dir,
    shard_key,
    shards,
)
from containmentbench.pipeline.status import study_status
from containmentbench.runtime.driver import AsyncAdapter
from containmentbench.runtime.job import backend_config, run_job
from containmentbench.trace.io import CHECKSUMS
from tests.conftest import run_cli

TRACE_FILES = ("rollouts.parquet", "events.parquet", "edges.parquet")


def _study(tmp_path, name, *extra):
    return load_study(["study=smoke", f"results_dir={tmp_path / name}",
                       "study.defenses=[none,tool_boundary]", "study.seeds=[1]", *extra])


def _trace_bytes(data):
    return {s.id: [(shard_dir(data, s) / f).read_bytes() for f in TRACE_FILES]
            for s in shards(data)}


def test_job_async_and_per_shard_paths_are_byte_identical(tmp_path):
    a = _study(tmp_path, "job")
    (job,) = jobs(a)  # rollout_group=seed: both defenses and all stages of seed 1
    assert len(job.shards) == 8
    res = run_job(a, job, quiet=True)
    assert res.loads == 1 and len(res.done) == 8 and not res.errored
    assert job_marker(a, job).exists()
    rec = json.loads((run_dir(a) / "logs" / "rollout" / f"{job.name}.json").read_text())
    assert rec["backend_loads"] == 1 and 0 < rec["load_share"] < 1

    # the same shards, one process each, through the ad-hoc rollout verb
    b = _study(tmp_path, "per_shard")
    for s in shards(b):
        assert run_cli("rollout", "--suite", "smoke", "--stage", s.stage, "--scenarios",
                       ",".join(s.scenario_ids), "--defense", s.defense, "--seed", s.seed,
                       "--study", "smoke", "--out", shard_dir(b, s), "--quiet") == 0

    # the asynchronous driver (agenerate over sim, completions returned out of order)
    class Shuffled(AsyncAdapter):
        rng = random.Random(7)
        order: ClassVar[list[str]] = []

        async def agenerate(self, request):
            await asyncio.sleep(self.rng.random() * 0.003)
            self.order.append(request.request_id)
            return await super().agenerate(request)

    c = _study(tmp_path, "async")
    inner = make_backend(backend_config(c))
    res_c = run_job(c, jobs(c)[0], quiet=True, backend=Shuffled(inner))
    rollouts = [r.split("/")[0] for r in Shuffled.order]
    first, last = {}, {}
    for i, r in enumerate(rollouts):
        first.setdefault(r, i)
        last[r] = i
    # episodes run concurrently: some episode's calls are not contiguous
    assert any(last[r] - first[r] + 1 > rollouts.count(r) for r in first)
    assert len(res_c.done) == 8
    ref = _trace_bytes(a)
    assert _trace_bytes(b) == ref
    assert _trace_bytes(c) == ref


def test_rerun_redoes_only_unfinished_shards(tmp_path):
    data = _study(tmp_path, "r")
    (job,) = jobs(data)
    run_job(data, job, quiet=True)
    victim = job.shards[3]
    import shutil
    shutil.rmtree(shard_dir(data, victim))          # as if the job was killed before it
    job_marker(data, job).unlink()
    before = {s.id: (shard_dir(data, s) / CHECKSUMS).stat().st_mtime_ns
              for s in job.shards if s != victim}
    res = run_job(data, job, quiet=True)
    assert res.done == [victim.id] and len(res.skipped) == 7
    after = {s.id: (shard_dir(data, s) / CHECKSUMS).stat().st_mtime_ns
             for s in job.shards if s != victim}
    assert after == before                           # finished shards untouched
    assert study_status(data)["done"] == [s.id for s in shards(data)]
    # nothing left: the backend is not even loaded
    assert run_job(data, job, quiet=True).loads == 0
    # another runtime configuration: every shard is stale and the job redoes all of them
    changed = _study(tmp_path, "r", "runtime.max_steps=30")
    assert study_status(changed)["stale"] == [s.id for s in shards(data)]
    assert len(run_job(changed, jobs(changed)[0], quiet=True).done) == 8
    assert len(study_status(changed)["done"]) == 8


def test_operational_options_stay_out_of_the_shard_key(tmp_path):
    from tests.models.fake_server import FakeServer

    served = ["Qwen/Qwen2.5-7B-Instruct"]
    with FakeServer(served) as one, FakeServer(served) as two:  # asked at composition
        base = ["backend=openai", "model=qwen2_5_7b_instruct", f"base_url={one.base_url}"]
        a = _study(tmp_path, "k", *base)
        b = _study(tmp_path, "k", *base, f"backend.options.base_url={two.base_url}",
                   "backend.options.concurrency=64", "backend.options.timeout_s=5",
                   "backend.options.max_retries=0", "backend.window=3")
        c = _study(tmp_path, "k", *base, "decoding.temperature=0.3")
        d = _study(tmp_path, "k", *base, "backend.tool_mode=constrained")
    s = shards(a)[0]
    # decoding and tool mode decide what the model answers: never pooled with other shards
    assert shard_key(a, s) == shard_key(b, s) != shard_key(c, s)
    assert len({shard_key(a, s), shard_key(c, s), shard_key(d, s)}) == 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Stub(BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible chat endpoint: every agent answers at once."""

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        body = json.dumps({"id": "c", "object": "chat.completion", "model": asked["model"],
                           "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": '{"final_answer": "Done."}'}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_dead_server_shard_errors_then_completes(tmp_path, capsys):
    from tests.models.fake_server import FakeServer

    served = ["Qwen/Qwen2.5-7B-Instruct"]
    port = _free_port()
    with FakeServer(served, port=port):  # up when the study is composed, then gone
        data = _study(tmp_path, "dead", "backend=openai", "model=qwen2_5_7b_instruct",
                      "study.stages=[security]", "study.defenses=[none]",
                      f"backend.options.base_url=http://127.0.0.1:{port}/v1",
                      "backend.options.max_retries=1", "backend.options.backoff_base_s=0.01",
                      "backend.options.timeout_s=5")
    cfg = run_dir(data) / "config.yaml"
    save_resolved(data, cfg)
    (job,) = jobs(data)
    (s,) = job.shards
    assert run_cli("rollout", "--study-config", cfg, "--job", job.name, "--quiet") == 1
    assert not (shard_dir(data, s) / CHECKSUMS).exists()
    assert not job_marker(data, job).exists()
    assert study_status(data)["errored"] == [s.id]
    assert "errored" in capsys.readouterr().err

    server = ThreadingHTTPServer(("127.0.0.1", port), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert run_cli("rollout", "--study-config", cfg, "--job", job.name, "--quiet") == 0
    finally:
        server.shutdown()
        server.server_close()
    assert (shard_dir(data, s) / CHECKSUMS).exists() and job_marker(data, job).exists()
    st = study_status(data)
    assert st["done"] == [s.id] and not st["errored"]

    # the server moves to another port: operational, so the finished shard is not redone
    with FakeServer(served) as elsewhere:  # the same server, on another port
        moved = _study(tmp_path, "dead", "backend=openai", "model=qwen2_5_7b_instruct",
                       "study.stages=[security]", "study.defenses=[none]",
                       f"base_url={elsewhere.base_url}",
                       "backend.options.concurrency=2", "backend.options.timeout_s=1")
    before = (shard_dir(data, s) / CHECKSUMS).stat().st_mtime_ns
    res = run_job(moved, jobs(moved)[0], quiet=True)
    assert res.skipped == [s.id] and res.loads == 0 and not res.errored
    assert (shard_dir(data, s) / CHECKSUMS).stat().st_mtime_ns == before


def test_context_overflow_is_recorded_not_fatal():
    from containmentbench.runtime.job import is_context_overflow
    assert is_context_overflow("context overflow: HTTP 400: maximum context length")
    assert not is_context_overflow("provider failed after 2 attempts: ConnectError")
    assert not is_context_overflow(None)


@pytest.mark.parametrize("group,n", [("model", 1), ("seed", 1), ("defense_seed", 2),
                                     ("shard", 8)])
def test_rollout_group(tmp_path, group, n):
    data = _study(tmp_path, "g", f"cluster.rollout_group={group}")
    js = jobs(data)
    assert len(js) == n and sum(len(j.shards) for j in js) == 8
    assert len({j.name for j in js}) == n


class _FailingFor:
    """Sim, except that every call of one defense's episodes fails with ``error``."""

    def __init__(self, inner, defense: str, error: str) -> None:
        self.inner, self.defense, self.error = inner, defense, error
        self.name, self.seed_supported = inner.name, inner.seed_supported

    def generate(self, requests):
        from containmentbench.models.base import Completion
        out = self.inner.generate(requests)
        return [Completion(text="", error=self.error) if r.sim[2].defense == self.defense
                else c for r, c in zip(requests, out, strict=True)]

    def close(self) -> None:
        self.inner.close()


def test_one_errored_shard_fails_the_job_and_keeps_the_others(tmp_path):
    data = _study(tmp_path, "e", "study.stages=[security]")
    (job,) = jobs(data)
    inner = make_backend(backend_config(data))
    res = run_job(data, job, quiet=True,
                  backend=_FailingFor(inner, "tool_boundary", "provider failed: boom"))
    bad = [s.id for s in job.shards if s.defense == "tool_boundary"]
    good = [s.id for s in job.shards if s.defense == "none"]
    assert res.errored == bad and res.done == good
    assert not job_marker(data, job).exists()
    st = study_status(data)
    assert st["errored"] == bad and st["done"] == good
    # a context overflow is the model's limit, recorded in the trace, not a failed shard
    res = run_job(data, job, quiet=True,
                  backend=_FailingFor(inner, "tool_boundary", "context overflow: HTTP 400"))
    assert res.done == bad and res.skipped == good and job_marker(data, job).exists()
    import pyarrow.parquet as pq
    ro = pq.read_table(shard_dir(data, shards(data)[-1]) / "rollouts.parquet").to_pylist()
    assert {r["status"] for r in ro} == {"error"}
    assert study_status(data)["errored"] == []
