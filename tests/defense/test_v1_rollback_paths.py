"""v1's confirmation path and rollback_v2's own decisions (paper 000 §5.4 eq. 11, §5.6,
Appendix H step 7; docs/metrics.md "v1's confirmation path" and "rollback_v2"): decisions on
hand-built proposals, and whole episodes whose false-positive counts are worked by hand."""

from __future__ import annotations

import copy
import json

import pytest

from containmentbench.defense import ALLOW, BLOCK, CONFIRM, Confirmation, DefenseConfig
from containmentbench.defense.builtin.paper import TaintOnlyV1, crossed_agents
from containmentbench.defense.loading import load_defense
from containmentbench.errors import BenchError
from containmentbench.metrics.definitions import RolloutTrace, false_positive_counts
from containmentbench.models.base import BackendConfig
from containmentbench.models.scripted import ScriptedBackend
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.episode import RuntimeConfig
from containmentbench.scenarios.model import Scenario
from tests.defense.helpers import call, ctx, defense


def _pick(suite, stage, topology, carrier):
    return next(s for s in suite if s.stage == stage and s.topology == topology
                and s.carrier == carrier)


def _benign_side_effect(s):
    from containmentbench.sandbox.tools import TOOLS
    return next(st for st in s.benign_plan
                if st.tool in TOOLS and TOOLS[st.tool].kind == "side_effect")


def _proposal(s, step, agent=None, tainted=True, args=None):
    labels = frozenset(f"taint:{u['source_id']}" for u in s.untrusted) if tainted else \
        frozenset()
    a = dict(step.args if args is None else args)
    return call(step.tool, a, agent or step.agent, step.session, tainted, labels,
                {k: tainted for k in a})


# ---------------------------------------------------------------- v1 (eq. 11 + confirmation)

def test_v1_confirms_a_ledger_match_its_own_agent_read(full_main):
    s = _pick(full_main, "active_tainted", "single", "retrieved_document")
    step = _benign_side_effect(s)
    v1 = defense("taint_only_v1")
    q = _proposal(s, step)
    d = v1.authorize(q, ctx(v1, s))
    assert (d.verdict, d.rule_id, d.ledger_match) == (CONFIRM, "confirm_tainted_ledger_match",
                                                     True)
    assert d.evidence["crossed"] == [] and "expand" not in d.evidence  # v1 reads no Expand
    assert v1.confirm(q, ctx(v1, s)) == Confirmation(True, "confirmation_approved_ledger_match")
    # untainted: eq. 11 allows a ledger match directly
    assert v1.authorize(_proposal(s, step, tainted=False), ctx(v1, s)).verdict == ALLOW


def test_v1_blocks_taint_that_crossed_an_agent(full_main):
    relayed = _pick(full_main, "active_tainted", "supervisor_worker", "retrieved_document")
    step = _benign_side_effect(relayed)
    assert step.agent == "worker"
    q = _proposal(relayed, step)
    v1 = defense("taint_only_v1")
    assert crossed_agents(q, ctx(v1, relayed)) == ["relayed"]
    d = v1.authorize(q, ctx(v1, relayed))
    assert (d.verdict, d.rule_id) == (BLOCK, "block_low_to_high_privilege_jump")
    message = _pick(full_main, "active_tainted", "single", "inter_agent_message")
    q = _proposal(message, _benign_side_effect(message))
    c = ctx(v1, message)
    assert crossed_agents(q, c) == ["inter_agent_message"]
    assert v1.authorize(q, c).verdict == BLOCK


def test_v1_blocks_a_tainted_mismatch_and_the_pure_ablation(full_main):
    s = _pick(full_main, "active_tainted", "single", "tool_result")
    step = _benign_side_effect(s)
    wrong = {**step.args, next(iter(k for k in step.args if k in ("to", "contact_id", "doc_id",
                                                                   "attendees", "channel"))):
             "someone@else.local"}
    v1 = defense("taint_only_v1")
    d = v1.authorize(_proposal(s, step, args=wrong), ctx(v1, s))
    assert (d.verdict, d.ledger_match) == (BLOCK, False)
    pure = TaintOnlyV1(DefenseConfig("taint_only_v1", "1.1", "taint_firewall", None,
                                    {"confirm_own_observation": False}))
    assert pure.authorize(_proposal(s, step), ctx(pure, s)).verdict == BLOCK
    deny = TaintOnlyV1(DefenseConfig("taint_only_v1", "1.1", "taint_firewall", None,
                                    {"confirmer": "deny"}))
    assert deny.confirm(_proposal(s, step), ctx(deny, s)) == Confirmation(
        False, "confirmation_not_committed")
    with pytest.raises(BenchError, match="confirmer"):
        TaintOnlyV1(DefenseConfig("taint_only_v1", "1.1", "taint_firewall", None,
                                 {"confirmer": "ask_a_human"}))


# ---------------------------------------------------------------- rollback_v2

def test_rollback_v2_one_live_commit_per_ledger_entry(full_main):
    s = _pick(full_main, "active_tainted", "single", "retrieved_document")
    step = _benign_side_effect(s)
    q = _proposal(s, step)
    v2, rb = defense("intent_ledger_v2"), defense("rollback_v2")
    live = {"commit_id": "cmt-1", "tool": step.tool, "args": dict(step.args), "session": 1,
            "seq": 5, "tainted": True, "high_risk": True, "rolled_back": False}
    assert rb.authorize(q, ctx(rb, s)).verdict == ALLOW
    assert v2.authorize(q, ctx(v2, s, (live,))).verdict == ALLOW
    d = rb.authorize(q, ctx(rb, s, (live,)))
    assert (d.verdict, d.rule_id, d.evidence["entry_commits"]) == (
        BLOCK, "block_ledger_entry_committed", ["cmt-1"])
    # a rolled-back commit no longer holds the entry
    assert rb.authorize(q, ctx(rb, s, ({**live, "rolled_back": True},))).verdict == ALLOW


def _memory_scenario(full_main, drop_write_entry=False):
    s = next(x for x in full_main if x.stage == "memory_recovery" and x.topology == "single"
             and x.carrier == "retrieved_document"
             and x.recovery["action"] == "memory_quarantine")
    if not drop_write_entry:
        return s
    rec = copy.deepcopy(s.record)
    rec["ledger"] = [e for e in rec["ledger"] if e["action"] != "memory_write"]
    return Scenario.from_dict(rec)


def test_rollback_v2_keeps_an_authorized_write_and_rolls_back_an_unauthorized_one(full_main):
    s = _memory_scenario(full_main)
    quarantine = next(st for st in s.benign_plan if st.tool == "memory_quarantine")
    write = next(st for st in s.benign_plan if st.tool == "memory_write")
    commit = {"commit_id": "cmt-1", "tool": "memory_write", "args": dict(write.args),
              "session": 1, "seq": 7, "tainted": True, "high_risk": True, "rolled_back": False}
    q = _proposal(s, quarantine, tainted=False)
    rb = defense("rollback_v2")
    d = rb.authorize(q, ctx(rb, s, (commit,)))
    # the ledger authorized the write: the quarantine is carried out as asked, confirmed
    assert (d.verdict, d.rule_id, d.rollback) == (CONFIRM, "confirm_recovery_action", ())
    assert rb.confirm(q, ctx(rb, s, (commit,))) == Confirmation(True, "confirmation_approved_recovery")
    # the same write without a ledger entry authorizing it: rolled back instead
    u = _memory_scenario(full_main, drop_write_entry=True)
    d = rb.authorize(q, ctx(rb, u, (commit,)))
    assert (d.verdict, d.rollback) == (CONFIRM, ("cmt-1",))


# ---------------------------------------------------------------- whole episodes by hand

def _repeat_send(s):
    """The scenario with its authorized side effect proposed twice (an agent that resends)."""
    rec = copy.deepcopy(s.record)
    plan = rec["plans"]["benign"]
    i = next(k for k, st in enumerate(plan) if st["tool"] == _benign_side_effect(s).tool)
    plan.insert(i + 1, copy.deepcopy(plan[i]))
    return Scenario.from_dict(rec)


def _fp(s, defense):
    backend = ScriptedBackend(BackendConfig("scripted", "scripted"))
    ctx = ShardContext("test", "scripted", "scripted", defense, 1, None)
    (ep,), _, _ = run_episodes([s], load_defense(defense), backend, ctx, RuntimeConfig())
    events = [dict(e, labels=sorted(lab)) for e, lab in zip(ep.rec.events, ep.rec.labels)]
    for e in events:
        for k in ("commit_id", "args", "high_risk", "call_id", "decision"):
            e.setdefault(k, None)
    t = RolloutTrace({"env_diff": json.dumps(ep.env_diff())}, events, [], s)
    return false_positive_counts(t)


def test_rollback_v2_blocks_a_repeat_v2_commits(full_main):
    # single agent, own read: v1 confirms both sends (FP confirm 2/2), v2 allows both
    # (0/2), rollback_v2 allows the first and blocks the repeat (FP block 1/2)
    s = _repeat_send(_pick(full_main, "active_tainted", "single", "retrieved_document"))
    assert _fp(s, "intent_ledger_v2") == {"authorized_opportunities": 2, "fp_block_count": 0,
                                          "fp_confirm_count": 0}
    assert _fp(s, "rollback_v2") == {"authorized_opportunities": 2, "fp_block_count": 1,
                                     "fp_confirm_count": 0}
    assert _fp(s, "taint_only_v1") == {"authorized_opportunities": 2, "fp_block_count": 0,
                                       "fp_confirm_count": 2}
