"""``containmentbench show``: the timeline, its JSON, and bad input."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from containmentbench.report.rundir import RunDir
from containmentbench.trace.graph import TraceGraph
from tests.conftest import run_cli


def _some_rollout(run_dir, defense="none", stage="security"):
    t = pq.read_table(run_dir / "metrics" / "rollout_metrics.parquet").to_pylist()
    return next(r["rollout_id"] for r in t if r["defense"] == defense and r["stage"] == stage
                and r["committed_harm"] == 1)


def test_show_text_timeline(run_dir, capsys):
    rid = _some_rollout(run_dir)
    assert run_cli("show", rid, "--study", run_dir) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"rollout {rid}")
    assert "simulated agent" in out
    for kind in ("source", "model_call", "proposal", "decision", "commit", "tool_result"):
        assert f" {kind} " in out
    # the committed violation's nodes are marked as in the taint closure
    assert any(" T  " in line and " commit " in line for line in out.splitlines())


def test_show_json_matches_trace_graph(run_dir, capsys):
    rid = _some_rollout(run_dir)
    assert run_cli("show", rid, "--study", run_dir, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    r = RunDir(run_dir).load(rid)
    g = TraceGraph(r.events, r.edges)
    assert data["taint_closure"] == sorted(g.taint_closure())
    assert [e["seq"] for e in data["events"]] == sorted(e["seq"] for e in r.events)
    assert {e["seq"] for e in data["events"] if e["in_taint_closure"]} == g.taint_closure()
    assert data["rollout"]["defense"] == "none" and data["simulated_agent"] is True


def test_show_searches_results_without_study(run_dir, capsys):
    rid = _some_rollout(run_dir)
    assert run_cli("show", rid, "--results", run_dir.parent) == 0
    assert rid in capsys.readouterr().out


def test_unknown_rollout_is_one_line_exit_2(run_dir, capsys):
    assert run_cli("show", "r-0000000000000000", "--study", run_dir) == 2
    err = capsys.readouterr().err
    assert "unknown rollout id 'r-0000000000000000'" in err and err.count("\n") == 1


def test_study_without_traces_is_exit_2(tmp_path, capsys):
    assert run_cli("show", "r-1", "--study", tmp_path) == 2
    assert "no finished trace shards" in capsys.readouterr().err
    assert run_cli("report", tmp_path) == 2
