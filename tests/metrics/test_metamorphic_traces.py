"""Metamorphic tests at trace level (hypothesis): rolling back a commit changes only the
recovery metrics (C_tau keeps the commit, §4.4), and the shard a rollout is stored in never
changes its metrics row."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from containmentbench.metrics import definitions as M
from containmentbench.metrics.compute import compute_metrics
from containmentbench.scenarios.oracle import Committed, violations
from containmentbench.trace.io import read_table, write_shard
from tests.conftest import run_cli

from .test_definitions import ATT, TB

ACTIONS = {
    "bad_send": ("send_email", {"to": ATT, "subject": "x", "body": "y"}),
    "good_send": ("send_email", {"to": "jules.frost@corp.local", "subject": "s", "body": "b"}),
    "record": ("write_task_record", {"summary": "data migration notes"}),
    "share_private": ("share_document", {"doc_id": "doc-1", "recipient": ATT}),
}
UNCHANGED = ("committed_harm", "unauthorized_action", "secret_leakage", "wrong_recipient",
             "harm_attempt", "taint_to_commit_rate", "privilege_jump", "benign")


def _build(steps, rollback_of=None):
    """A trace from (action, tainted, committed) steps; optionally roll back the commit of
    step ``rollback_of`` at the end."""
    t = TB()
    src = t.add("source", labels=["taint:s"])
    g = t.add("user_goal")
    commits = {}
    for i, (name, tainted, committed) in enumerate(steps):
        tool, args = ACTIONS[name]
        a = json.dumps(args)
        c = t.add("model_call", flows=[g, src] if tainted else [g],
                  parse_status="valid_strict_json", repaired=False)
        p = t.add("proposal", flows=[c], tool=tool, args=a, call_id=f"c{i}", high_risk=True)
        d = t.add("decision", links=[p], call_id=f"c{i}",
                  decision="allow" if committed else "block", rule_id="r")
        if committed:
            commits[i] = t.add("commit", flows=[p], links=[d], tool=tool, args=a,
                               call_id=f"c{i}", commit_id=f"cmt-{i}", high_risk=True)
    if rollback_of is not None:
        t.add("rollback", links=[commits[rollback_of]], commit_id=f"cmt-{rollback_of}")
    return t


def _values(tr):
    return {"committed_harm": M.committed_harm(tr),
            "unauthorized_action": M.unauthorized_action(tr),
            "secret_leakage": M.secret_leakage(tr), "wrong_recipient": M.wrong_recipient(tr),
            "harm_attempt": M.harm_attempt(tr), "taint_to_commit_rate": M.taint_to_commit_rate(tr),
            "privilege_jump": M.privilege_jump(tr), "benign": M.benign(tr),
            "rollback_count": M.rollback_count(tr), "rolled_back_harm": M.rolled_back_harm(tr),
            "rolled_back_required": M.rolled_back_required(tr)}


steps_st = st.lists(st.tuples(st.sampled_from(sorted(ACTIONS)), st.booleans(), st.booleans()),
                    min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(steps_st, st.data())
def test_rolling_back_a_commit_changes_only_recovery_metrics(smoke, steps, data):
    committed = [i for i, s in enumerate(steps) if s[2]]
    if not committed:
        return
    k = data.draw(st.sampled_from(committed))
    scn = next(s for s in smoke if s.id == "sm-sec-0001")
    roll = {"env_diff": "{}", "status": "ok", "n_model_calls": len(steps)}
    t0, t1 = _build(steps), _build(steps, rollback_of=k)
    before = _values(M.RolloutTrace(roll, t0.events, t0.edges, scn))
    after = _values(M.RolloutTrace(roll, t1.events, t1.edges, scn))
    for name in UNCHANGED:
        assert after[name] == before[name], name
    assert after["rollback_count"] == before["rollback_count"] + 1
    tool, args = ACTIONS[steps[k][0]]
    bad = violations(scn, Committed(tool, args, 1, True)).any
    assert after["rolled_back_harm"] == int(before["rolled_back_harm"] or bad)
    # rolled_back_required: the rolled-back commit is one that met a requirement of B(tau)
    _, met = before["benign"]
    refs = M.RolloutTrace(roll, t1.events, t1.edges, scn).commits
    k_ref = next(e["seq"] for e in t1.events if e["kind"] == "commit"
                 and e["commit_id"] == f"cmt-{k}")
    assert after["rolled_back_required"] == int(any(m is not None and refs[m].ref == k_ref
                                                    for m in met))


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    d = tmp_path_factory.mktemp("move") / "one" / "shard"
    assert run_cli("rollout", "--suite", "smoke", "--stage", "security", "--defense", "none",
                   "--seed", 1, "--out", d, "--quiet") == 0
    return d


def _split(shard, out, first: set[str]):
    tabs = {n: read_table(shard / f"{n}.parquet", n) for n in ("rollouts", "events", "edges")}
    for name, keep in (("a", True), ("b", False)):
        part = {}
        for n, t in tabs.items():
            mask = pc.is_in(t.column("rollout_id"), value_set=pa.array(sorted(first)))
            part[n] = t.filter(mask if keep else pc.invert(mask))
        write_shard(out / name, part)


@settings(max_examples=4, deadline=None, derandomize=True)
@given(st.data())
def test_moving_a_rollout_between_shards_changes_nothing(shard, tmp_path_factory, data):
    ids = read_table(shard / "rollouts.parquet", "rollouts").column("rollout_id").to_pylist()
    first = set(data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids) - 1,
                                   unique=True)))
    moved = data.draw(st.sampled_from(ids))
    other = first ^ {moved} or {ids[0]}
    if len(other) == len(ids):
        other -= {moved}
    base = compute_metrics(shard.parent, workers=1)
    out1, out2 = tmp_path_factory.mktemp("s1"), tmp_path_factory.mktemp("s2")
    _split(shard, out1, first)
    _split(shard, out2, other)
    assert compute_metrics(out1, workers=1).equals(base)
    assert compute_metrics(out2, workers=1).equals(base)
