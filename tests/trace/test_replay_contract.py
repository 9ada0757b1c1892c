"""A scripted replay of the smoke suite writes rollouts/events/edges Parquet that round-trip
through the schema check, and every node's recorded labels equal its membership in the
networkx taint closure (eq. 2), for replays and for sim rollouts under every defense."""

from __future__ import annotations

from collections import defaultdict

import pytest

from containmentbench.trace.graph import TraceGraph
from containmentbench.trace.io import read_table, shard_dirs, verify_shard
from containmentbench.trace.recorder import is_tainted
from containmentbench.trace.schema import TRACE_TABLES
from tests.conftest import run_cli


def _by_rollout(table):
    out = defaultdict(list)
    for row in table.to_pylist():
        out[row["rollout_id"]].append(row)
    return out


def _assert_labels_are_closure(shard):
    events = _by_rollout(read_table(shard / "events.parquet", "events"))
    edges = _by_rollout(read_table(shard / "edges.parquet", "edges"))
    for rid, evs in events.items():
        g = TraceGraph(evs, edges.get(rid, []))
        labelled = {e["seq"] for e in evs if is_tainted(e["labels"])}
        assert labelled == g.taint_closure(), rid
        assert g.taint_closure() <= g.structural_reach() or not g.sources
        for e in edges.get(rid, []):
            assert e["src"] < e["dst"]  # the trace graph is a DAG in logical time


@pytest.mark.parametrize("plan", ["benign", "attacker"])
def test_replay_round_trip(tmp_path, plan):
    out = tmp_path / plan
    assert run_cli("replay", "--suite", "smoke", "--plan", plan, "--out", out) == 0
    for name in TRACE_TABLES:
        t = read_table(out / f"{name}.parquet", name)
        assert t.num_rows > 0
    assert verify_shard(out) == []
    _assert_labels_are_closure(out)


def test_sim_rollouts_labels_are_closure(tmp_path):
    for d in ("none", "intent_ledger_v2", "rollback_v2", "structured_guard"):
        assert run_cli("rollout", "--suite", "smoke", "--defense", d, "--seed", 3,
                       "--out", tmp_path / d, "--quiet") == 0
    for shard in shard_dirs(tmp_path):
        _assert_labels_are_closure(shard)
