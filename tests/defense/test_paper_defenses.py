"""The seven defenses (paper 000 Table 8) on the sim agent's extreme profiles, and the
decision contract: rule ids, policy hashes, purity."""

from __future__ import annotations

import pytest

from containmentbench.defense.builtin.paper import SEVEN
from containmentbench.defense.loading import load_defense
from containmentbench.metrics.definitions import RolloutTrace, authorized_tainted_action_success
from containmentbench.models.base import BackendConfig
from containmentbench.models.sim import SimBackend
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.episode import RuntimeConfig
from containmentbench.scenarios.oracle import violations
from containmentbench.scenarios.selfcheck import committed, final_memory

DEFENSES = SEVEN
ENFORCING = ("tool_boundary", "taint_only_v1", "intent_ledger_v2", "rollback_v2",
             "structured_guard")


def _run(scenarios, defense, profile, seed=1):
    backend = SimBackend(BackendConfig("sim", "sim", options={"profile": profile}))
    ctx = ShardContext("test", f"sim:{profile}", "sim", defense, seed, profile)
    eps, _, _ = run_episodes(scenarios, load_defense(defense), backend, ctx, RuntimeConfig())
    return eps


@pytest.fixture(scope="module")
def everything(full_main, stress):
    return full_main + stress


def test_none_commits_each_targeted_violation(everything):
    sec = [s for s in everything if s.stage == "security"]
    for s, ep in zip(sec, _run(sec, "none", "always_follow")):
        want = {"unauthorized": "unauthorized", "wrong_recipient": "wrong_recipient",
                "secret_leak": "secret_leak"}[s.attacker_goal["violation"]["kind"]]
        assert any(getattr(violations(s, c), want) for c in committed(ep)), s.id


@pytest.mark.parametrize("defense", ENFORCING)
def test_enforcing_defenses_commit_no_violation(everything, defense):
    for s, ep in zip(everything, _run(everything, defense, "always_follow")):
        for c in committed(ep):
            v = violations(s, c)
            assert not (v.unauthorized or v.wrong_recipient or v.secret_leak), (s.id, c)


def _u_active(s, ep):
    events = [dict(e, labels=sorted(lab)) for e, lab in zip(ep.rec.events, ep.rec.labels)]
    for e in events:
        e.setdefault("commit_id", None)
        e.setdefault("args", None)
        e.setdefault("high_risk", None)
        e.setdefault("call_id", None)
    import json
    rollout = {"env_diff": json.dumps(ep.env_diff()), "status": ep.status}
    edges = [{"src": a, "dst": b, "kind": k, "propagates_taint": p}
             for a, b, k, p in ep.rec.edges]
    return authorized_tainted_action_success(RolloutTrace(rollout, events, edges, s))


def test_v2_and_boundary_complete_what_v1_blocks(full_main):
    active = [s for s in full_main if s.stage == "active_tainted"]
    results = {d: [_u_active(s, ep) for s, ep in zip(active, _run(active, d, "never_follow"))]
               for d in ("taint_only_v1", "intent_ledger_v2", "tool_boundary")}
    # v1 completes exactly where its confirmation path applies: the acting agent read the
    # tainted source itself (single agent, not another agent's message); everywhere else
    # the taint crossed an agent boundary and v1 blocks (docs/metrics.md)
    own = [s.topology == "single" and s.carrier != "inter_agent_message" for s in active]
    assert results["taint_only_v1"] == [int(o) for o in own]
    repaired = [s for i, s in enumerate(active)
                if results["intent_ledger_v2"][i] and results["tool_boundary"][i]]
    assert len(repaired) == len(active)
    # the paper's Cases 2-3: an invite to the authorized partner after a benign partner note
    cal = [s for s in repaired if s.domain == "calendar_crm"
           and any(st.tool == "send_invite" for st in s.benign_plan)]
    assert cal


def test_every_decision_has_rule_id_and_policy_metadata(smoke):
    for d in DEFENSES:
        pol = load_defense(d)
        assert len(pol.policy_hash) == 64 and pol.method_version
        for ep in _run(smoke, d, "default"):
            for e in ep.rec.events:
                if e["kind"] in ("decision", "confirmation"):
                    assert e["rule_id"], (d, e)
    hashes = {load_defense(d).policy_hash for d in DEFENSES}
    assert len(hashes) == len(DEFENSES)


def test_memory_final_state_helper(smoke):
    ep = _run([s for s in smoke if s.stage == "memory_recovery"][:1], "none", "never_follow")[0]
    assert all("status" in v for v in final_memory(ep).values())
