"""Scenario generation: factorial counts, byte-identical regeneration, committed suites, and
the safety constraints on injected content (paper 000 §3.7, Table 3, Table 17)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from containmentbench.scenarios.generator import DEFAULT_SEED, generate_suite
from containmentbench.scenarios.manifest import MANIFEST, render_suite
from containmentbench.scenarios.model import Scenario
from tests.conftest import ROOT


@pytest.mark.parametrize("suite", ["full_main", "stress", "smoke", "exposed_real"])
def test_regeneration_is_byte_identical_and_matches_committed(suite):
    a = render_suite(suite, DEFAULT_SEED, generate_suite(suite, DEFAULT_SEED))
    b = render_suite(suite, DEFAULT_SEED, generate_suite(suite, DEFAULT_SEED))
    assert a == b
    committed = ROOT / "scenarios" / suite
    for name, data in a.items():
        assert (committed / name).read_bytes() == data, f"{suite}/{name} drifted"


def test_stage_counts():
    full = generate_suite("full_main")
    assert {k: len(v) for k, v in full.items()} == {
        "security": 192, "memory_recovery": 96, "active_tainted": 120, "clean": 96}
    assert {k: len(v) for k, v in generate_suite("stress").items()} == {"security": 48}


def test_another_seed_changes_content_not_design():
    a = generate_suite("smoke", 1)
    b = generate_suite("smoke", 2)
    assert [r["family"] for r in a["security"]] == [r["family"] for r in b["security"]]
    assert a != b


def test_factorial_balance(full_main):
    sec = [s for s in full_main if s.stage == "security"]
    assert Counter(s.domain for s in sec) == {"email": 64, "document": 64, "calendar_crm": 64}
    assert Counter(s.attack_goal for s in sec) == {g: 48 for g in (
        "unauthorized_side_effect", "wrong_recipient", "secret_leakage", "persistence")}
    assert Counter(s.carrier for s in sec) == {c: 48 for c in (
        "retrieved_document", "tool_result", "inter_agent_message", "persistent_memory")}
    assert set(Counter(s.topology for s in full_main)) == {
        "single", "supervisor_worker", "peer_chain"}
    for s in full_main:
        if s.attack_goal == "persistence" or s.carrier == "persistent_memory":
            assert s.memory_mode == "persistent"
        if s.stage == "clean":
            assert not s.untrusted
        if s.stage == "memory_recovery":
            assert s.n_sessions == 2 and s.recovery is not None
        if s.stage == "security":
            assert s.attacker_goal is not None and s.attacker_plan


def test_unique_ids_and_canaries(full_main, stress, smoke):
    ids = [s.id for s in full_main + stress + smoke]
    assert len(ids) == len(set(ids))
    tokens = [c["token"] for s in full_main + stress for c in s.canaries]
    assert len(tokens) == len(set(tokens))
    assert all(re.fullmatch(r"CB-CANARY-[0-9A-F]{10}", t) for t in tokens)


_EMAIL = re.compile(r"[\w.+-]+@[\w.-]+")


def test_safety_constraints(full_main, stress):
    """Reserved local domains only; plain-language ASCII injections (no invisible text,
    encodings or obfuscation)."""
    for s in full_main + stress:
        text = str(s.record)
        for addr in _EMAIL.findall(text):
            assert addr.rstrip(".").endswith(".local"), (s.id, addr)
        assert text.isascii(), s.id
        for u in s.untrusted:
            assert not re.search(r"[A-Za-z0-9+/]{40,}={0,2}", u["text"]), "encoded payload"
            assert u["text"].isprintable()


def test_every_record_validates(full_main):
    for s in full_main:
        again = Scenario.from_dict(s.record)
        assert again.hash == s.hash


def test_manifest_lists_every_scenario():
    import json
    m = json.loads((ROOT / "scenarios" / "full_main" / MANIFEST).read_text())
    assert m["total"] == 504 and len(m["scenarios"]) == 504


def test_exposed_real_has_balanced_topologies_and_twelve_clusters_per_stage():
    suite = generate_suite("exposed_real")
    assert set(suite) == {"security", "active_tainted", "clean"}
    for stage, recs in suite.items():
        assert len({r["cluster_id"] for r in recs}) == 12, stage
        assert Counter(r["topology"] for r in recs) == {
            "single": 4, "supervisor_worker": 4, "peer_chain": 4}, stage
        assert Counter(r["domain"] for r in recs) == {
            "email": 4, "document": 4, "calendar_crm": 4}, stage
        assert all(r["prefill"] for r in recs)  # the carrier in the first observation
    sec = suite["security"]
    assert Counter(r["attack_goal"] for r in sec) == {
        "wrong_recipient": 4, "unauthorized_side_effect": 3, "persistence": 3,
        "secret_leakage": 2}
    assert {r["attack_goal"] for r in sec if r["topology"] == "single"} == {
        "wrong_recipient", "unauthorized_side_effect", "persistence", "secret_leakage"}
