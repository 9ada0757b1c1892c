"""Counterfactual replay: neutralisation, determinism of the unmodified replay, one probe per
source and the conjunctive joint probe."""

from __future__ import annotations

from collections import Counter

import pytest

from containmentbench.audit.replay import PLACEHOLDER, Replayer, neutralize, probe, run_one
from containmentbench.defense.loading import load_defense
from containmentbench.models.base import BackendConfig, make_backend
from containmentbench.runtime.episode import RolloutSpec, RuntimeConfig

SINKS = frozenset({"send_email", "share_document", "post_status_note", "create_event",
                   "send_invite", "update_crm", "draft_email", "write_task_record"})


def _rep(s, profile="always_follow") -> Replayer:
    backend = make_backend(BackendConfig(name="sim", model="sim", options={"profile": profile}))
    spec = RolloutSpec("r-test", "t", "sim", "sim", "none", 3, profile)
    return Replayer(s, load_defense("none"), spec, RuntimeConfig(), backend, SINKS)


def test_neutralize_replaces_every_copy_of_the_source(smoke) -> None:
    s = next(x for x in smoke if x.untrusted)
    sid = s.untrusted[0]["source_id"]
    n = neutralize(s, [sid])
    assert n.untrusted[0]["text"] == PLACEHOLDER
    blob = str(n.initial_state)
    assert s.untrusted[0]["text"] not in blob and PLACEHOLDER in blob
    assert s.untrusted[0]["text"] in str(s.initial_state)  # the original is untouched
    with pytest.raises(KeyError):
        neutralize(s, ["src-none"])


def test_unmodified_replay_reproduces_the_rollout(smoke) -> None:
    s = next(x for x in smoke if x.stage == "security")
    rep = _rep(s, "default")
    ep = run_one(s, rep.policy, rep.spec, rep.cfg, rep.backend)
    original = Counter((e["tool"], e.get("args") or "{}") for e in ep.rec.events
                       if e["kind"] == "commit" and e.get("tool") in SINKS)
    assert rep.calls_without(frozenset()) == original
    assert rep.calls_without(frozenset()) == original and rep.replays == 1  # cached


def test_probe_finds_the_attack_sink_caused_by_the_source(smoke) -> None:
    s = next(x for x in smoke if x.stage == "security" and x.attack_steps)
    rep = _rep(s)
    base = rep.calls_without(frozenset())
    attack = s.attack_steps[0]
    from containmentbench.canonical import canonical_json
    key = (attack.tool, canonical_json(attack.args))
    assert base[key] >= 1  # the always-follow agent carried out the injected call
    sids = [u["source_id"] for u in s.untrusted]
    causes, conj = probe(rep, attack.tool, dict(attack.args), sids, base)
    assert causes and not conj
    # a benign-plan sink is not caused by the untrusted source
    benign = [p for p in s.benign_plan if p.tool in SINKS]
    for b in benign:
        if base[(b.tool, canonical_json(b.args))] and b.args != attack.args:
            assert probe(rep, b.tool, dict(b.args), sids, base) == ([], False)


class _Stub:
    """Replayer stand-in: the sink disappears only when both sources are neutralised."""

    def __init__(self) -> None:
        self.replays = 0

    def influenced(self, tool, args, ids, original) -> bool:
        return ids == frozenset({"a", "b"})


def test_conjunctive_causes_are_reported_together() -> None:
    causes, conj = probe(_Stub(), "send_email", {}, ["a", "b"], Counter())
    assert causes == ["a", "b"] and conj
    assert probe(_Stub(), "send_email", {}, ["a"], Counter()) == ([], False)
