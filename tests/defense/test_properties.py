"""Property tests over random proposals and ledgers (hypothesis): eq. 10 and eq. 11 hold as
stated, and policies are pure functions of their inputs."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from containmentbench.defense import ALLOW
from containmentbench.sandbox.tools import SIDE_EFFECT_TOOLS, TOOLS
from containmentbench.scenarios.ledger import authority_match, entry_matches
from containmentbench.scenarios.model import LedgerEntry
from tests.conftest import ROOT
from tests.defense.helpers import call, ctx, defense

RECIPS = ["a@corp.local", "b@corp.local", "p@partner.local", "x@evil.local"]
IDS = ["doc-1", "doc-2", "evt-1", "ct-2", "ct-3", "general", "team-status", "k1"]
VIS = ["private", "internal", "public"]
TOOLNAMES = sorted(SIDE_EFFECT_TOOLS | {"memory_write"})


def _value(p):
    if p.role == "recipient":
        return st.lists(st.sampled_from(RECIPS), min_size=1, max_size=2) if p.type == "list" \
            else st.sampled_from(RECIPS)
    if p.role == "visibility":
        return st.sampled_from(VIS)
    if p.role in ("target", "field"):
        return st.sampled_from([*IDS, "status", "discount"])
    return st.sampled_from(["hello", "budget review", "CB-CANARY-0000000000", ""])


@st.composite
def proposals(draw):
    tool = draw(st.sampled_from(TOOLNAMES))
    args = {}
    for p in TOOLS[tool].params:
        if p.required or draw(st.booleans()):
            args[p.name] = draw(_value(p))
    tainted_fields = {k: draw(st.booleans()) for k in args}
    return tool, args, tainted_fields, draw(st.booleans())


@st.composite
def ledgers(draw):
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        tool = draw(st.sampled_from(TOOLNAMES))
        spec = TOOLS[tool]
        tf = draw(st.sampled_from([p.name for p in spec.params
                                   if p.role in ("recipient", "target")]))
        ptype = next(p for p in spec.params if p.name == tf)
        target = draw(st.sampled_from(RECIPS if ptype.role == "recipient" else IDS))
        pred = {}
        for p in spec.params:
            if p.name == tf or not draw(st.booleans()):
                continue
            if p.role == "visibility":
                pred[p.name] = {"op": "max_visibility", "value": draw(st.sampled_from(VIS))}
            elif p.role == "recipient":
                pred[p.name] = {"op": "in", "value": draw(st.lists(st.sampled_from(RECIPS),
                                                                    min_size=1))}
            else:
                pred[p.name] = {"op": "any"}
        entries.append(LedgerEntry(tool, tf, target, pred))
    return tuple(entries)


def _scenario(smoke, ledger):
    return dataclasses.replace(smoke[0], ledger=ledger)


def _proposal(tool, args, tf, tainted):
    return call(tool, args, "a", 1, tainted, frozenset({"taint:x"}) if tainted else frozenset(),
                tf, seq=0)


def _decide(name, q, s):
    d = defense(name)
    return d.authorize(q, ctx(d, s))


_SMOKE = []


def _smoke():
    if not _SMOKE:
        from containmentbench.scenarios.manifest import load_suite
        _SMOKE.extend(load_suite(ROOT / "scenarios" / "smoke"))
    return _SMOKE


@settings(max_examples=600, deadline=None)
@given(proposals(), ledgers())
def test_v2_never_allows_unauthorized_or_expanding(prop, ledger):
    tool, args, tf, tainted = prop
    s = _scenario(_smoke(), ledger)
    q = _proposal(tool, args, tf, tainted)
    d = _decide("intent_ledger_v2", q, s)
    if d.verdict == ALLOW:
        # action, target and visibility are in the ledger (eq. 9, exact)
        entry = next(e for e in ledger if entry_matches(e, tool, args))
        assert authority_match(tool, args, ledger) is not None
        # no tainted authority field outside what the matched entry authorizes
        for f, t in tf.items():
            if t and f in TOOLS[tool].authority_fields and args.get(f) not in (None, "", []):
                assert f == entry.target_field or f in entry.predicate


@settings(max_examples=600, deadline=None)
@given(proposals(), ledgers())
def test_v1_never_allows_tainted_high_risk(prop, ledger):
    tool, args, tf, tainted = prop
    s = _scenario(_smoke(), ledger)
    d = _decide("taint_only_v1", _proposal(tool, args, tf, tainted), s)
    if tainted:
        assert d.verdict != ALLOW and d.rule_id == "block_low_to_high_privilege_jump"


@settings(max_examples=300, deadline=None)
@given(proposals(), ledgers())
def test_policies_are_pure(prop, ledger):
    tool, args, tf, tainted = prop
    s = _scenario(_smoke(), ledger)
    for name in ("tool_boundary", "taint_only_v1", "intent_ledger_v2", "rollback_v2",
                 "structured_guard"):
        a = _decide(name, _proposal(tool, args, tf, tainted), s)
        b = _decide(name, _proposal(tool, dict(args), dict(tf), tainted), s)
        assert a == b and a.rule_id
