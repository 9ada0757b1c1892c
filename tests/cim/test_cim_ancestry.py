"""Q3 across delegation boundaries on real rollouts, scored against the runtime's own trace
graph (taint flows and invocation links), never against CIM fields."""

from __future__ import annotations

import polars as pl

from containmentbench.cim.ancestry import SpanForest, recorded_upstream_reads
from containmentbench.cim.queries import externalization
from containmentbench.cim.store import Store
from containmentbench.trace.io import read_shards


def test_sub_agent_shares_reach_parent_reads(rollout_shard, rollout_store):
    root = rollout_shard.parent
    gt = recorded_upstream_reads(pl.from_arrow(read_shards(root, "events")),
                                 pl.from_arrow(read_shards(root, "edges")))
    s = Store(rollout_store)
    side = s.delegations().collect()
    sub = set(side.filter(pl.col("depth") > 0)["delegation_id"])
    found = {}
    for d in side.filter(pl.col("depth") == 0)["delegation_id"]:
        for r in externalization(s, d).table.iter_rows(named=True):
            found[r["event_id"]] = r
    shares = [e for e, r in found.items() if r["delegation_id"] in sub]
    assert shares, "the smoke suite has sub-agent external shares"
    crossing = 0
    for e in shares:
        truth = gt[e]
        got = set(found[e]["ancestor_read_events"])
        assert truth <= got, e  # every read that reached the share is found
        assert got <= truth, e  # and nothing that did not
        crossing += any(d != found[e]["delegation_id"]
                        for d in found[e]["upstream_delegations"])
    assert crossing > 0  # some upstream reads belong to a parent delegation


def test_upstream_takes_earlier_siblings_not_later_ones():
    # agent span A with calls r1 (t=1), d (t=2, delegates to sub-agent span B), r2 (t=5);
    # B's share s (t=3): r1 is upstream (seen before delegating), r2 is not
    rows = pl.DataFrame({
        "span_id": ["A", "r1", "d", "B", "s", "r2"],
        "parent_span_id": [None, "A", "A", "d", "B", "A"],
        "time": [0, 1, 2, 2, 3, 5], "_pos": list(range(6)),
        "event_id": ["a", "r1", "d", "b", "s", "r2"]})
    f = SpanForest(rows)
    assert f.upstream("s", (3, 4)) == ["B", "d", "A", "r1"]
