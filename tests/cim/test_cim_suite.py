"""The six-query suite (§7.4, App. E): plans answer hand-worked questions on the hand-built
store, Table 7 is derived from the plans that run, and `cim report` prints both tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl

from containmentbench.cim import plans as P
from containmentbench.cim import suite
from containmentbench.cim.schema import CIM_EVENTS, conform
from containmentbench.cim.store import Store, write_store
from containmentbench.cli.main import main

from .conftest import hand_rows

Q = {q.key: q for q in suite.SUITE}


def _answer(store: Store, key: str, method: str, d: str, delta: float = 30.0) -> pl.DataFrame:
    base = P.sources(store, d, delta)
    src = base if method == "baseline" else P.cim_sources(base, store)
    plan = Q[key].baseline if method == "baseline" else Q[key].cim
    return plan.build(src).collect()


def test_suite_has_the_six_items_of_section_7_4_and_maps_every_table7_class():
    assert [q.number for q in suite.SUITE] == ["i", "ii", "iii", "iv", "v", "vi"]
    assert {q.query_class for q in suite.SUITE} == set(suite.PAPER_T7)
    assert [q.strategy for q in suite.SUITE[2:5]] == ["trace", "window", "hybrid"]


def test_closure_cim_lists_every_instance_of_the_lineage(hand_store):
    st = Store(hand_store)
    got = _answer(st, "closure", "CIM", "dA")
    # dA -> dB -> dC; the unbound c4 claims dC but is not attributed
    assert got.select("agent_instance_id", "n_events", "max_sensitivity_rank").rows() == [
        ("iA", 4, 2), ("iB", 3, 3), ("iC", 4, 1)]


def test_trace_only_touch_set_over_groups_a_foreign_write(hand_store):
    st = Store(hand_store)
    cim = _answer(st, "trace", "CIM", "dA").sort("resource_class")
    assert cim.select("resource_class", "sensitivity_label").rows() == [
        ("agent", "internal"), ("crm_record", "confidential"), ("document", "internal")]
    base = _answer(st, "trace", "baseline", "dA").sort("resource_class")
    # trace TA also carries dE's write to chan-1: B0 cannot tell it apart
    assert base.select("resource_class", "sensitivity_label").rows() == [
        ("agent", "internal"), ("channel", "internal"), ("crm_record", "confidential"),
        ("document", "internal")]


def test_drift_cim_sees_the_approval_the_baseline_cannot(tmp_path):
    rows = hand_rows()
    for r in rows:  # the share's tool-native operation (App. B.2: addMember -> share)
        if r["event_id"] == "d2":
            r["tool_operation"] = "addMember"
    cols = {f.name: [r[f.name] for r in rows] for f in CIM_EVENTS}
    st = Store(write_store(tmp_path / "h", conform(cols), workflow="hand"))
    # dD: read doc-1 twice, then shares confidential doc-2 outside; approval at t=21
    assert _answer(st, "drift", "CIM", "dD").height == 0
    base = _answer(st, "drift", "baseline", "dD")
    assert base.select("action_semantic", "sensitivity_label").rows() == [
        ("share", "confidential")]


def test_drift_needs_the_share_to_leave_the_organization(tmp_path):
    rows = hand_rows()
    for r in rows:  # the same late confidential share, now to a colleague
        if r["event_id"] == "d2":
            r.update(tool_operation="addMember", direction="internal",
                     principal_scope="org", target_principal_id="z@corp.example")
        if r["event_id"] == "d3":
            r.update(event_kind="proposal", action_semantic="read")  # no approval now
    cols = {f.name: [r[f.name] for r in rows] for f in CIM_EVENTS}
    st = Store(write_store(tmp_path / "h", conform(cols), workflow="hand"))
    assert _answer(st, "drift", "CIM", "dD").height == 0
    # the baseline's reference data knows corp.example is the organization's own domain
    assert P.sources(st, "dD").org_domains == ("corp.example",)
    assert _answer(st, "drift", "baseline", "dD").height == 0


def _seq_source(rows: list[tuple[int, str, str, str]]) -> tuple[pl.LazyFrame, P.Sources]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    lf = pl.DataFrame({
        "event_id": [f"e{i}" for i in range(len(rows))],
        "time": [t0 + timedelta(seconds=t) for t, *_ in rows],
        "delegation_id": ["d"] * len(rows), "tool_name": [r[1] for r in rows],
        "action_semantic": [r[2] for r in rows], "resource_id": [r[3] for r in rows]}).lazy()
    empty = pl.LazyFrame()
    return lf, P.Sources(lf, empty, empty, empty, empty, "d", "d", "e0", 30.0)


def test_sequence_counts_distinct_reads_on_distinct_tools_before_a_mutation():
    lf, src = _seq_source([(0, "docs", "read", "r1"), (1, "docs", "read", "r1"),
                           (2, "docs", "write", "w1"),     # 1 distinct read: no
                           (3, "crm", "search", "r2"),
                           (4, "docs", "share", "w2"),     # r1, r2 on docs, crm: hit
                           (5, "crm", "read", "r3"), (6, "email", "read", "w1")])
    hits = P.sequence_hits(P.running_reads(lf, src), src).collect()
    assert hits.select("event_id", "reads_before", "read_tools_before").rows() == [
        ("e4", 2, 2)]


def test_table7_is_derived_from_the_plans_that_run(monkeypatch):
    before = {r[0]: r for r in suite.table7()}
    q = Q["closure"]
    extra = suite.Op("identity", "a second directory", P.unify_identity)
    grown = replace(q, baseline=suite.Plan((*q.baseline.ops, extra)))
    monkeypatch.setattr(suite, "SUITE", tuple(grown if x is q else x for x in suite.SUITE))
    after = {r[0]: r for r in suite.table7()}
    n = suite.counts(q.baseline)
    assert before["authority propagation"][2] == str(n["corr_ops"])
    assert after["authority propagation"][2] == str(n["corr_ops"] + 1)
    assert after["authority propagation"][4] == str(n["steps"] + 1)


def test_run_times_every_plan_and_feeds_the_runtime_row(hand_store):
    st = Store(hand_store)
    res = suite.run(st, ["dA", "dD"], deltas=(5.0, 30.0), repeats=1)
    # per delegation: 6 CIM plans, 1 trace and 1 drift baseline, 4 windowed baselines x 2
    assert res.filter(pl.col("method") == "CIM").height == 12
    assert res.filter(pl.col("method") == "baseline").height == 2 * (2 + 4 * 2)
    rt = suite.runtime_row(res)
    assert rt["n_cim"] == 12 and rt["baseline_s"] > 0 and rt["cim_s"] > 0
    rows = suite.table9(res)
    assert [r[0] for r in rows] == ["(i) closure", "(ii) sequence", "(iii) trace",
                                    "(iv) window", "(v) hybrid", "(vi) drift"]
    assert "5s:" in rows[3][8] and "30s:" in rows[3][8]


def test_report_prints_the_six_query_table_and_rejects_unknown_delegations(
        hand_store, capsys):
    assert main(["cim", "report", "--store", str(hand_store), "--delegation", "dA",
                 "--suite-repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "## Six-query suite" in out and "(vi) drift" in out
    assert "| Query runtime, median (ms) |" in out and "comparable" in out
    assert "| authority propagation | (i) |" in out
    assert main(["cim", "report", "--store", str(hand_store), "--delegation", "dA,nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown delegation 'nope'" in err
