"""Episode runtime: topologies and delegation lineage, determinism, step limits, provider
errors, invalid tools never executed."""

from __future__ import annotations

from collections import defaultdict

import pyarrow.parquet as pq

from containmentbench.defense.loading import load_defense
from containmentbench.models.base import BackendConfig, Completion
from containmentbench.models.scripted import ScriptedBackend
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.episode import RuntimeConfig
from containmentbench.trace.io import read_table
from tests.conftest import run_cli


def test_two_runs_are_byte_identical(tmp_path):
    for name in ("a", "b"):
        assert run_cli("rollout", "--suite", "smoke", "--defense", "intent_ledger_v2",
                       "--seed", 7, "--out", tmp_path / name, "--quiet") == 0
    for table in ("rollouts", "events", "edges"):
        assert (tmp_path / "a" / f"{table}.parquet").read_bytes() == \
            (tmp_path / "b" / f"{table}.parquet").read_bytes()
    # wall-clock facts live in a separate table
    assert "wall_s" in pq.read_schema(tmp_path / "a" / "timings.parquet").names


def test_topologies_have_correct_lineage(tmp_path, full_main):
    out = tmp_path / "s"
    assert run_cli("rollout", "--suite", "full_main", "--stage", "security", "--defense",
                   "none", "--seed", 1, "--out", out, "--quiet") == 0
    ro = {r["rollout_id"]: r for r in read_table(out / "rollouts.parquet", "rollouts").to_pylist()}
    events = defaultdict(list)
    for e in read_table(out / "events.parquet", "events").to_pylist():
        events[e["rollout_id"]].append(e)
    seen = set()
    for rid, evs in events.items():
        topo = ro[rid]["topology"]
        seen.add(topo)
        minted = [e for e in evs if e["kind"] == "delegate"]
        by_agent = {e["agent_id"]: e for e in minted}
        roots = [e for e in minted if e["delegation_parent_id"] is None]
        assert len(roots) == 1
        if topo == "supervisor_worker":
            assert by_agent["worker"]["delegation_parent_id"] == \
                by_agent["supervisor"]["resource_id"]
        elif topo == "peer_chain":
            assert by_agent["agent_b"]["delegation_parent_id"] == by_agent["agent_a"]["resource_id"]
            assert by_agent["agent_c"]["delegation_parent_id"] == by_agent["agent_b"]["resource_id"]
        ids = {e["resource_id"] for e in minted}
        for e in evs:  # every agent event is bound to a minted delegation
            if e["agent_id"] is not None:
                assert e["delegation_id"] in ids and e["binding"] == "bound"
        msgs = [e for e in evs if e["kind"] == "message"]
        if topo != "single":
            assert msgs  # inter-agent messages are trace nodes
    assert seen == {"single", "supervisor_worker", "peer_chain"}


class _Const:
    """A backend that always says the same thing."""

    name = "const"
    seed_supported = False

    def __init__(self, text, error=None):
        self.text, self.error = text, error

    def generate(self, reqs):
        return [Completion(self.text, error=self.error) for _ in reqs]

    def close(self):
        pass


def _run(smoke, backend, cfg=None):
    ctx = ShardContext("t", "m", "b", "none", 0, None)
    eps, _, _ = run_episodes(smoke[:3], load_defense("none"), backend, ctx, cfg or RuntimeConfig())
    return eps


def test_invalid_tool_never_executes(smoke):
    eps = _run(smoke, _Const('{"tool": "wire_money", "arguments": {"amount": "1"}}'))
    for ep in eps:
        kinds = [e["kind"] for e in ep.rec.events]
        assert "invalid_tool" in kinds and "proposal" not in kinds and "commit" not in kinds
        assert ep.status == "ok"  # the agent gave up after repeated invalid actions


def test_provider_error_ends_rollout_with_status_error(smoke):
    for ep in _run(smoke, _Const("", error="HTTP 503 after 3 retries")):
        assert ep.status == "error" and ep.error.startswith("HTTP 503")
        assert not ep.commits


def test_step_limit(smoke):
    cfg = RuntimeConfig(max_steps=2)
    backend = ScriptedBackend(BackendConfig("scripted", "scripted"))
    for ep in _run(smoke, backend, cfg):
        assert ep.status == "step_limit" and ep.counts["model_calls"] == 2


def test_dropped_calls_are_recorded(smoke):
    two = ('<tool_call>{"name": "memory_list", "arguments": {}}</tool_call>'
           '<tool_call>{"name": "read_messages", "arguments": {}}</tool_call>')
    ep = _run(smoke, _Const(two), RuntimeConfig(max_steps=1))[0]
    kinds = [e["kind"] for e in ep.rec.events]
    assert kinds.count("proposal") == 1 and kinds.count("dropped_call") == 1
