"""Throughput as a result (issue 36, item 4): what a rollout job counts, the rates it gives,
and where they are shown -- the job record and log, ``status``, the headline's footer and
``tables/throughput.*`` -- without entering ``results.parquet`` or the byte comparisons.

Counts are pinned against independent values: completions made up here, the number of
``model_call`` events in the traces, the metrics' rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from containmentbench.config.compose import load_study
from containmentbench.errors import BenchError
from containmentbench.pipeline.plan import jobs, run_dir, shard_dir, shards
from containmentbench.pipeline.throughput import Tally, job_records, line, pooled
from containmentbench.runtime.job import run_job
from tests.conftest import SMALL_SMOKE_OVERRIDES, copy_finished_smoke, run_cli


@dataclass
class _C:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    cached_tokens: int | None = None


def test_a_tally_counts_usage_cache_and_errors_and_gives_rates():
    t = Tally("vllm", rollouts=4)
    for c in (_C(100, 20, cached_tokens=64), _C(50, 10),  # an engine that said nothing
              _C(900, 0, error="context overflow: ..."), _C(0, 0, error="HTTP 500")):
        t.add(c)
    t.run_s = 2.0
    r = t.record()
    assert (r["model_calls"], r["call_errors"]) == (2, 2)
    assert (r["prompt_tokens"], r["output_tokens"]) == (150, 30)  # errors did no engine work
    assert r["rollouts_per_hour"] == pytest.approx(7200.0)        # 4 in 2 s
    assert r["model_calls_per_s"] == pytest.approx(1.0)
    assert r["prompt_tokens_per_s"] == pytest.approx(75.0)
    assert r["output_tokens_per_s"] == pytest.approx(15.0)
    # 64 of the 100 prompt tokens of the one call the engine reported on
    assert r["prefix_cache_hit_rate"] == pytest.approx(0.64)
    assert r["sim_agent"] is False and r["tokens"] == "the backend's usage"
    text = line(r)
    assert "7,200 rollouts/h" in text and "prefix-cache hit rate 64.0%" in text


def test_no_usage_and_no_cache_figure_are_null_never_estimates():
    sim = Tally("sim", rollouts=2)
    sim.add(_C(0, 7))  # the simulated agent's text length / 4, not a token count
    sim.run_s = 1.0
    r = sim.record()
    assert r["prompt_tokens_per_s"] is None and r["output_tokens_per_s"] is None
    assert r["prefix_cache_hit_rate"] is None and r["sim_agent"] is True
    assert "simulated agent" in r["tokens"] and "simulated agent" in line(r)
    assert "prefix-cache hit rate none" in line(r)
    silent = Tally("openai", rollouts=1)
    silent.add(_C(0, 0))  # a server that sent no usage
    silent.run_s = 1.0
    assert silent.record()["output_tokens_per_s"] is None
    assert silent.record()["model_calls_per_s"] == pytest.approx(1.0)


def test_a_study_pools_its_jobs_summed_counts_over_summed_run_time():
    a, b = Tally("vllm", rollouts=10), Tally("vllm", rollouts=30)
    a.add(_C(1000, 100, cached_tokens=500))
    b.add(_C(3000, 300, cached_tokens=0))
    a.run_s, b.run_s = 10.0, 30.0
    s = pooled([a.record(), b.record()])
    assert s["rollouts_per_hour"] == pytest.approx(40 * 3600 / 40)
    assert s["output_tokens_per_s"] == pytest.approx(400 / 40)
    assert s["prefix_cache_hit_rate"] == pytest.approx(500 / 4000)
    assert pooled([]) is None


def _study(tmp_path, *extra):
    return load_study(["study=smoke", f"results_dir={tmp_path}", *SMALL_SMOKE_OVERRIDES,
                       *extra])


def _model_calls(data) -> int:
    """``model_call`` events in the job's traces: the calls the backend answered."""
    return sum(pl.read_parquet(shard_dir(data, s) / "events.parquet")
               .filter(pl.col("kind") == "model_call").height for s in shards(data))


def test_a_job_records_its_throughput_and_a_rerun_keeps_it(tmp_path):
    data = _study(tmp_path)
    (job,) = jobs(data)
    res = run_job(data, job, quiet=True)
    rec = json.loads((run_dir(data) / "logs" / "rollout" / f"{job.name}.json").read_text())
    tp = rec["throughput"]
    rollouts = sum(pl.read_parquet(shard_dir(data, s) / "rollouts.parquet").height
                   for s in shards(data))
    assert tp["rollouts"] == rollouts == 3 * 16
    assert tp["model_calls"] == _model_calls(data) and tp["call_errors"] == 0
    assert 0 < tp["run_s"] <= res.wall_s
    assert tp["rollouts_per_hour"] == pytest.approx(rollouts * 3600 / tp["run_s"], rel=1e-5)
    assert tp["backend"] == "sim" and tp["sim_agent"] is True
    # nothing left to run: the record keeps the figures of the run that did the work
    assert run_job(data, job, quiet=True).loads == 0
    again = json.loads((run_dir(data) / "logs" / "rollout" / f"{job.name}.json").read_text())
    assert again["ran"] == 0 and again["throughput"] == tp


def test_the_async_driver_counts_the_same_calls(tmp_path):
    from containmentbench.models.base import make_backend
    from containmentbench.runtime.driver import AsyncAdapter
    from containmentbench.runtime.job import backend_config

    data = _study(tmp_path)
    (job,) = jobs(data)
    res = run_job(data, job, quiet=True, backend=AsyncAdapter(make_backend(
        backend_config(data))))
    assert res.tally is not None and res.tally.model_calls == _model_calls(data)


def test_a_malformed_record_is_one_line_naming_file_and_field(tmp_path, capsys):
    data = _study(tmp_path)
    (job,) = jobs(data)
    run_job(data, job, quiet=True)
    path = run_dir(data) / "logs" / "rollout" / f"{job.name}.json"
    rec = json.loads(path.read_text())
    rec["throughput"]["run_s"] = "fast"
    path.write_text(json.dumps(rec))
    with pytest.raises(BenchError, match="run_s"):
        job_records(run_dir(data))
    capsys.readouterr()
    assert run_cli("status", "study=smoke", f"results_dir={tmp_path}",
                   *SMALL_SMOKE_OVERRIDES) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "throughput.run_s" in err


def test_a_reply_s_cached_tokens_are_read_and_checked():
    from containmentbench.models.http_response import ReplyError, check_completion

    body = {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 3,
                      "prompt_tokens_details": {"cached_tokens": 32}}}
    assert check_completion(body, "m").cached_tokens == 32
    body["usage"]["prompt_tokens_details"] = None
    assert check_completion(body, "m").cached_tokens is None
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": -1}
    with pytest.raises(ReplyError, match=r"usage\.prompt_tokens_details\.cached_tokens"):
        check_completion(body, "m")


def test_a_finished_study_shows_its_throughput_apart_from_its_results(finished_smoke,
                                                                       tmp_path, capsys):
    base = copy_finished_smoke(finished_smoke, tmp_path / "s")
    (metrics_dir,) = sorted((base / "results" / "smoke").glob("*/metrics"))
    run = metrics_dir.parent
    t = pl.read_parquet(run / "tables" / "throughput.parquet")
    study = t.filter(pl.col("job").is_null())
    fig = dict(zip(study["metric"].to_list(), study["estimate"].to_list(), strict=True))
    metrics = pl.read_parquet(run / "metrics" / "rollout_metrics.parquet")
    events = sum(pl.read_parquet(p).filter(pl.col("kind") == "model_call").height
                 for p in (run / "traces").rglob("events.parquet"))
    assert fig["rollouts"] == metrics.height and fig["model_calls"] == events
    assert fig["rollouts_per_hour"] == pytest.approx(fig["rollouts"] * 3600 / fig["run_s"])
    assert fig["output_tokens_per_s"] is None and fig["prefix_cache_hit_rate"] is None
    assert t["sim_agent"].all() and set(t["source_table"]) == {"throughput"}
    assert set(t.columns) >= {"estimate", "ci_low", "ci_high", "n", "n_clusters", "interval"}
    # wall clock: beside results.parquet, not in it; listed so reproduce skips it
    res = pl.read_parquet(run / "tables" / "results.parquet")
    assert "throughput" not in set(res["source_table"].to_list())
    wall = json.loads((run / "analysis.json").read_text())["wall_clock"]
    assert {f"tables/throughput.{x}" for x in ("parquet", "csv", "md", "tex")} <= set(wall)
    from containmentbench import results

    assert results.load(run).throughput.equals(t)
    capsys.readouterr()
    assert run_cli("headline", str(run)) == 0
    out = capsys.readouterr().out
    assert "throughput (wall clock; 1 rollout job(s) pooled): " \
           f"{int(fig['rollouts'])} rollouts in" in out
    assert "simulated agent" in out.split("throughput (wall clock")[1]
    headline_md = (run / "tables" / "headline.md").read_text()
    assert "rollouts/h" not in headline_md  # the frozen headline holds no wall clock
    assert run_cli("status", "study=smoke", f"results_dir={base / 'results'}",
                   *SMALL_SMOKE_OVERRIDES) == 0
    out = capsys.readouterr().out
    assert "throughput study (1 job(s), pooled)" in out and "throughput job " in out


def test_a_study_without_job_records_has_no_throughput_table(tmp_path):
    from containmentbench.analysis.tables import Context
    from containmentbench.analysis.throughput import throughput_table

    ctx = Context(pl.DataFrame({"study": ["s"], "model": ["m"], "backend": ["sim"],
                                "defense": ["none"]}))
    assert throughput_table(Path(tmp_path), Path(tmp_path) / "traces", ctx) is None


VLLM_METRICS = """# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1200.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 800.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 900.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 100.0
vllm:prompt_tokens_total{model_name="m"} 5000.0
"""


def test_a_server_s_metrics_page_gives_the_hit_rate_when_replies_do_not():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from containmentbench.pipeline.throughput import parse_prometheus, scrape

    assert parse_prometheus(VLLM_METRICS) == (1000, 2000)  # summed over the engines
    assert parse_prometheus("vllm:num_requests_running 3\n") is None  # not exposed
    pages = [VLLM_METRICS, VLLM_METRICS.replace("1200.0", "1600.0").replace("900.0", "1200.0")]

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages.pop(0).encode() if self.path == "/metrics" and pages else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        before, after = scrape(url), scrape(url)
        assert scrape(url) is None  # 404: none, never an error of the run
    finally:
        srv.shutdown()
    t = Tally("openai", rollouts=1)
    t.add(_C(500, 5))  # a reply without cached_tokens
    t.run_s = 1.0
    t.add_server(before, after)
    r = t.record()
    assert (r["server_cache_hits"], r["server_cache_queries"]) == (300, 400)
    assert r["prefix_cache_hit_rate"] == pytest.approx(0.75)
    assert "every client" in r["prefix_cache"]
    # per-call figures, when the replies carry them, win over the server's counters
    t.add(_C(100, 5, cached_tokens=10))
    assert t.record()["prefix_cache_hit_rate"] == pytest.approx(0.1)
    assert scrape("http://127.0.0.1:9/v1", timeout_s=1.0) is None  # nothing listening
