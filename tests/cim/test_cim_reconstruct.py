"""Baselines and metrics: Amb against brute-force enumeration, the §2.1 counterexample,
window units by hand, and the acceptance checks on real sim rollouts."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import polars as pl
import pytest

from containmentbench.cim.project import EPOCH_US
from containmentbench.cim.queries import agent_attribution, blast_radius, externalization, scope
from containmentbench.cim.reconstruct import (
    amb_run,
    evaluate,
    reconstruct_store,
    summarize,
    unit_metrics,
    units_b0,
    units_b1,
    units_b2,
)
from containmentbench.cim.store import Store
from containmentbench.trace.io import read_shards


def _brute_amb(units: list[int], gt: list[str], d: str) -> int:
    """Count labelings of d's events with delegation labels that are constant on each unit
    (a method cannot split its units) and only use delegations active in the unit."""
    labels = sorted(set(gt))
    mine = [i for i, g in enumerate(gt) if g == d]
    active = {u: {g for uu, g in zip(units, gt) if uu == u} for u in set(units)}
    count = 0
    for lab in itertools.product(labels, repeat=len(mine)):
        ok = all(lab[a] in active[units[i]] for a, i in enumerate(mine))
        ok = ok and all(lab[a] == lab[b] for a, b in itertools.combinations(range(len(mine)), 2)
                        if units[mine[a]] == units[mine[b]])
        count += ok
    return count


def _brute_run(units: list[int], gt: list[str]) -> int:
    labels = sorted(set(gt))
    count = 0
    for lab in itertools.product(labels, repeat=len(gt)):
        ok = all(lab[i] in {g for u, g in zip(units, gt) if u == units[i]}
                 for i in range(len(gt)))
        ok = ok and all(lab[i] == lab[j] for i, j in itertools.combinations(range(len(gt)), 2)
                        if units[i] == units[j])
        count += ok
    return count


def test_amb_matches_enumeration_on_small_cases():
    rng = random.Random(20260101)
    for _ in range(150):
        n = rng.randint(1, 7)
        gt = [rng.choice("abc") for _ in range(n)]
        units = [rng.randint(0, 3) for _ in range(n)]
        per = unit_metrics(pl.Series(gt), np.array(units))
        got = {r["gt_delegation_id"]: r for r in per.iter_rows(named=True)}
        for d in set(gt):
            assert round(10 ** got[d]["log10_amb"]) == _brute_amb(units, gt, d)
            mine = [u for u, g in zip(units, gt) if g == d]
            best = max(mine.count(u) for u in set(mine))
            assert got[d]["rec"] == pytest.approx(best / len(mine))
        if n <= 6:
            assert round(10 ** amb_run(pl.Series(gt), np.array(units))) == _brute_run(units, gt)


def _frame(rows: list[tuple]) -> pl.DataFrame:
    cols = ["event_id", "t", "principal_user_id", "agent_instance_id", "tool_name", "trace_id",
            "session_id", "delegation_id"]
    df = pl.DataFrame(rows, schema=cols, orient="row")
    return df.with_columns(
        pl.from_epoch(pl.lit(EPOCH_US) + (pl.col("t") * 1e6).cast(pl.Int64), "us")
        .dt.replace_time_zone("UTC").alias("time"),
        pl.col("delegation_id").alias("gt_delegation_id"), pl.lit(True).alias("covered"),
        pl.lit("bound").alias("delegation_binding")).drop("t")


def test_paper_counterexample_section_2_1():
    # e1..e6 of §2.1: traces T_A = {e1, e3, e6}, T_B = {e2, e4, e5}; the true delegations
    # cut across both traces, so trace grouping cannot tell the assignments apart.
    rows = [("e1", 1, "u", "i1", "drive", "TA", None, "d1"),
            ("e2", 2, "u", "i1", "slack", "TB", None, "d1"),
            ("e3", 3, "u", "i1", "drive", "TA", None, "d2"),
            ("e4", 4, "u", "i1", "confluence", "TB", None, "d2"),
            ("e5", 5, "u", "i1", "slack", "TB", None, "d1"),
            ("e6", 6, "u", "i1", "drive", "TA", None, "d2")]
    per = evaluate(_frame(rows), deltas=[5])
    b0 = per.filter(pl.col("method") == "B0").sort("gt_delegation_id")
    assert [round(10 ** x) for x in b0["log10_amb"]] == [4, 4]
    assert b0["rec"].to_list() == pytest.approx([2 / 3, 2 / 3])
    cim = per.filter(pl.col("method") == "CIM")
    assert cim["log10_amb"].to_list() == [0.0, 0.0] and cim["rec"].to_list() == [1.0, 1.0]
    assert round(10 ** b0["log10_amb_run"][0]) == 4  # Amb(E) = |D(T_A)| x |D(T_B)|


def test_window_and_hybrid_units_by_hand():
    rows = [("a", 0, "u1", "i1", "docs", None, None, "d1"),
            ("b", 3, "u1", "i1", "docs", None, None, "d1"),
            ("c", 10, "u1", "i2", "mail", "T9", None, "d2"),
            ("d", 100, "u1", "i1", "docs", "T9", None, "d2"),
            ("e", 1, "u2", "i3", "docs", None, "S1", "d3"),
            ("f", 50, "u2", "i3", "docs", None, "S1", "d3")]
    df = _frame(rows)

    def groups(u: np.ndarray) -> list[set[str]]:
        out: dict[int, set[str]] = {}
        for eid, k in zip(df["event_id"], u):
            out.setdefault(int(k), set()).add(eid)
        return sorted(out.values(), key=lambda s: min(s))

    # B1: windows of width Delta over the whole run, whatever the user (5 s: [0,5) [10,15)
    # [50,55) [100,105); 30 s: [0,30) [30,60) [90,120))
    assert groups(units_b1(df, 5)) == [{"a", "b", "e"}, {"c"}, {"d"}, {"f"}]
    assert groups(units_b1(df, 30)) == [{"a", "b", "c", "e"}, {"d"}, {"f"}]
    assert groups(units_b0(df)) == [{"a"}, {"b"}, {"c", "d"}, {"e", "f"}]
    # B2 unites trace/session links (T9: c-d, S1: e-f) with Delta chains per user (a-b),
    # per instance (a-b) and per tool: docs at 0, 1, 3 chains a-e-b across users
    assert groups(units_b2(df, 5)) == [{"a", "b", "e", "f"}, {"c", "d"}]
    # without the per-tool chain u1 and u2 stay apart: the tool chain is what merges users
    assert groups(units_b2(df.with_columns(pl.col("tool_name") + pl.col("event_id")), 5)) \
        == [{"a", "b"}, {"c", "d"}, {"e", "f"}]


# ---------------------------------------------------------------- acceptance on sim rollouts

def test_q1_q3_answer_for_every_rollout_delegation(rollout_store):
    s = Store(rollout_store, in_memory=True)
    side = s.delegations().collect()
    assert side.height >= 16
    for d in side["delegation_id"].to_list():
        q1 = blast_radius(s, d)
        q2 = agent_attribution(s, d)
        q3 = externalization(s, d)
        assert q1.info["delegation_id"] == d and q1.info["n_unbound_claims"] >= 0
        prim = q2.table.filter(pl.col("role") == "primary")
        assert prim.height == 1 and prim["delegation_id"][0] == d
        assert q3.info["externalized"] == (q3.table.height > 0)
    assert sum(externalization(s, d).table.height for d in side["delegation_id"]) > 0


def test_supervisor_worker_closure_returns_worker_actions(rollout_store, rollout_shard):
    s = Store(rollout_store, in_memory=True)
    events = pl.from_arrow(read_shards(rollout_shard.parent, "events"))
    topo = pl.from_arrow(read_shards(rollout_shard.parent, "rollouts", ["rollout_id",
                                                                        "topology"]))
    sw = topo.filter(pl.col("topology") == "supervisor_worker")["rollout_id"].to_list()
    assert sw
    for rid in sw:
        ev = events.filter(pl.col("rollout_id") == rid)
        roots = ev.filter((pl.col("kind") == "delegate")
                          & pl.col("delegation_parent_id").is_null())["delegation_id"]
        workers = ev.filter((pl.col("kind") == "proposal")
                            & pl.col("agent_id").eq("worker"))
        for root in roots.to_list():
            sc = scope(s, root)
            if len(sc.ids) == 1:
                continue  # a session whose supervisor never delegated
            assert len(sc.ids) >= 2
            got = set(s.rows(sc.ids).collect()["event_id"])
            mine = workers.filter(pl.col("delegation_id").is_in(sc.ids[1:]))
            assert set(mine["event_id"]) <= got
            q2 = agent_attribution(s, root).table
            assert "worker" in q2.filter(pl.col("role") == "sub-agent")["agent_id"].to_list()
        assert events.filter((pl.col("rollout_id") == rid) & (pl.col("kind") == "delegate")
                             & pl.col("delegation_parent_id").is_not_null()).height >= 1


def test_cim_reconstruction_exact_on_rollouts_baselines_measured(rollout_store):
    per, runs = reconstruct_store(Store(rollout_store))
    assert int(runs["n_evaluated"].sum()) == int(runs["n_events"].sum())
    for method in ("CIM", "CIM-closure"):  # by delegation_id, and by lineage family
        cim = per.filter(pl.col("method") == method)
        assert cim["log10_amb"].max() == 0.0 and cim["rec"].min() == 1.0
    assert set(per["method"]) == {"CIM", "CIM-closure", "B0", "B1", "B2"}
    fam = per.filter((pl.col("method") == "CIM-closure") & (pl.col("workflow")
                                                              == "supervisor_worker"))
    assert fam["n"].sum() == per.filter((pl.col("method") == "CIM") & (
        pl.col("workflow") == "supervisor_worker"))["n"].sum()
    summ = summarize(per, ["workflow"])
    assert summ.filter(pl.col("method").is_in(["B1", "B2"]))["delta_s"].null_count() == 0
    for topo in ("supervisor_worker", "peer_chain"):
        # one trace per root task spans its sub-agents: B0 no longer ties CIM (issue 25)
        b0 = summ.filter((pl.col("workflow") == topo) & (pl.col("method") == "B0"))
        assert b0["amb_median"][0] >= 2 and b0["prec_median"][0] < 1.0
    single = summ.filter((pl.col("workflow") == "single") & (pl.col("method") == "B0"))
    assert single["amb_median"][0] == 1  # one agent, one delegation per trace
    assert math.isfinite(per["log10_amb"].max())
