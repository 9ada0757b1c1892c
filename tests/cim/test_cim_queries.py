"""Queries over hand-built telemetry whose answers are known (conftest.hand_rows)."""

from __future__ import annotations

import polars as pl
import pytest

from containmentbench.cim.divergence import divergence
from containmentbench.cim.drift import drift
from containmentbench.cim.queries import (
    agent_attribution,
    blast_radius,
    externalization,
    lineage,
    misbinding,
)
from containmentbench.cim.store import Store
from containmentbench.errors import BenchError


def _groups(table: pl.DataFrame) -> dict[tuple[str, str], tuple[int, int, list[str]]]:
    return {(r["resource_class"], r["sensitivity_label"]):
            (r["n_calls"], r["n_commits"], r["resources"]) for r in table.iter_rows(named=True)}


def test_q1_blast_radius_includes_descendants(hand_store):
    r = blast_radius(Store(hand_store), "dA")
    assert _groups(r.table) == {
        ("file", "restricted"): (1, 0, ["file-9"]),
        ("crm_record", "confidential"): (1, 0, ["crm-1"]),
        ("agent", "internal"): (2, 0, ["mailer", "researcher"]),
        ("document", "internal"): (1, 0, ["doc-1"]),
        ("message", "internal"): (2, 1, ["msg-1", "msg-2"]),
    }
    # ordered by sensitivity, most sensitive first
    assert r.table["sensitivity_label"].to_list()[:2] == ["restricted", "confidential"]
    assert r.info["closure"] == ["dA", "dB", "dC"]
    # the unbound row claiming dC is counted, not attributed
    assert r.info["n_unbound_claims"] == 1


def test_q1_without_descendants(hand_store):
    r = blast_radius(Store(hand_store), "dA", include_descendants=False)
    assert set(_groups(r.table)) == {("crm_record", "confidential"), ("agent", "internal"),
                                     ("document", "internal")}
    assert r.info["n_unbound_claims"] == 0


def test_q2_primary_vs_subagent(hand_store):
    t = agent_attribution(Store(hand_store), "dA").table
    got = [(r["agent_id"], r["agent_instance_id"], r["delegation_id"], r["role"],
            r["lineage_depth"], r["n_calls"]) for r in t.iter_rows(named=True)]
    assert got == [("planner", "iA", "dA", "primary", 0, 3),
                   ("researcher", "iB", "dB", "sub-agent", 1, 2),
                   ("mailer", "iC", "dC", "sub-agent", 2, 2)]
    t = agent_attribution(Store(hand_store), "dB").table
    assert t["role"].to_list() == ["primary", "sub-agent"]


def test_q3_externalization_with_causal_ancestry(hand_store):
    r = externalization(Store(hand_store), "dA")
    assert r.info["externalized"] is True
    assert r.table.height == 1
    row = r.table.row(0, named=True)
    assert row["event_id"] == "c2" and row["delegation_id"] == "dC" and row["executed"]
    # span chain c1 <- c0 <- b2 <- b1 <- b0, crossing dC -> dB inside trace TB
    assert row["ancestor_event_ids"] == ["c1", "c0", "b2", "b1", "b0"]
    assert row["trace_reads"] == ["msg-1", "file-9"]
    # lineage crosses into dA, whose runtime trace TA never reaches TB: dA's reads before
    # it minted dB (t=4) and dB's before it minted dC (t=7); dC's own read first
    assert row["lineage_reads"] == ["msg-1", "file-9", "doc-1", "crm-1"]
    assert row["ancestor_reads"] == ["msg-1", "file-9", "doc-1", "crm-1"]
    assert row["upstream_delegations"] == ["dA", "dB", "dC"]
    assert row["max_ancestor_sensitivity"] == "restricted"
    d = externalization(Store(hand_store), "dD").table.row(0, named=True)
    assert d["event_id"] == "d2" and d["ancestor_event_ids"] == ["d1", "d0"]
    assert d["ancestor_read_events"] == ["d1", "d4"]  # d4 has no trace: lineage finds it
    none = externalization(Store(hand_store), "dE")
    assert none.table.height == 0 and none.info["externalized"] is False


def test_lineage_closure(hand_store):
    t = lineage(Store(hand_store), "dC").table
    assert list(zip(t["delegation_id"], t["relation"], t["distance"])) == [
        ("dB", "ancestor", -1), ("dA", "ancestor", -2), ("dC", "self", 0)]
    t = lineage(Store(hand_store), "dA").table
    assert t["relation"].to_list() == ["self", "descendant", "descendant"]


def test_divergence(hand_store):
    r = divergence(Store(hand_store))
    comp = dict(zip(r.table["delegation_id"], r.table["comp"]))
    assert comp == {"dA": 1, "dB": 1, "dC": 1, "dD": 1, "dE": 2}
    assert dict(zip(r.table["delegation_id"], r.table["n_untraced"]))["dD"] == 2  # d4, d3
    assert r.info["n_components_multi_delegation"] == 2  # TA (dA, dE) and TB (dB, dC)
    fam = dict(zip(r.info["families"]["root_delegation_id"], r.info["families"]["comp_closure"]))
    assert fam["dA"] == 2  # the sub-agent's runtime split the family across TA and TB
    # §5.2 issuance predicate: e2 ran in TA, outside dE's issuance trace TE
    assert dict(zip(r.table["delegation_id"], r.table["n_outside_issue_trace"]))["dE"] == 1


def test_drift_flags_unapproved_expansion(hand_store):
    a = drift(Store(hand_store), "dA").table.row(0, named=True)
    # dA's envelope grows on every dimension, but its one external share (c2) carries an
    # internal message: not high-impact (external dissemination of a sensitive resource,
    # cim/drift.py point 3), so nothing is flagged; tests/cim/test_drift.py flags a sensitive one
    assert not a["flagged"] and a["high_impact"] == []
    assert a["new_tool"] and a["new_action"] and a["new_resource_class"]
    assert a["sensitivity_increase"]  # restricted file-9 after at most confidential
    d = drift(Store(hand_store), "dD").table.row(0, named=True)
    assert d["high_impact"] and d["approved_after"] and not d["flagged"]
    every = drift(Store(hand_store)).table
    assert dict(zip(every["delegation_id"], every["flagged"])) == {
        "dA": False, "dD": False, "dE": False}


def test_misbinding_counts_unbound_and_principal_mismatch(hand_store):
    r = misbinding(Store(hand_store))
    assert r.info["n_unbound"] == 1
    signals = dict(zip(r.table["signal"], r.table["n_events"]))
    assert signals == {"misbinding:delegation_not_issued_to_agent": 1,
                       "misbinding:principal_mismatch": 1}
    assert sorted(r.info["events"]["event_id"]) == ["c4", "e3"]


def test_unknown_delegation_is_bench_error(hand_store):
    with pytest.raises(BenchError) as e:
        blast_radius(Store(hand_store), "nope")
    assert e.value.field == "delegation"


def test_divergence_predicate_ii_no_ancestor_link_to_issuance(hand_store):
    # (ii) counts events of d whose span chain never reaches issue(d)'s span:
    # dE: e2 is in TA under a2 (dA's span), e3 descends e1 -> e0 = issue(dE): only e2;
    # dD: d4 and the approval d3 have no span at all; d1, d2 descend from d0
    r = divergence(Store(hand_store)).table
    nd = dict(zip(r["delegation_id"], r["n_not_descended"]))
    assert nd == {"dA": 0, "dB": 0, "dC": 0, "dD": 2, "dE": 1}
