"""Q3 across delegation boundaries on real rollouts (issue 25 target: recall >= 0.95).

For every external share a sub-agent proposed (its delegation has a parent), the ground
truth is the set of read proposals that reach it in the runtime's own trace graph
(cim/ancestry.py ``recorded_upstream_reads``: taint flows and invocation links, never CIM
fields). Q3 (``cim externalization`` on the share's root delegation) is scored on it:
share-level recall (the share has upstream reads and Q3 finds at least one), read-level
recall and precision (micro averages), by ancestry source.

    python bench/cim_q3_recall.py --traces traces/ [--store cim/run]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import polars as pl

from containmentbench.cim.ancestry import recorded_upstream_reads
from containmentbench.cim.export import export_traces
from containmentbench.cim.queries import externalization
from containmentbench.cim.store import Store
from containmentbench.trace.io import read_shards


def score(traces: Path, store: Path) -> dict[str, float]:
    events = pl.from_arrow(read_shards(traces, "events"))
    gt = recorded_upstream_reads(events, pl.from_arrow(read_shards(traces, "edges")))
    s = Store(store)
    side = s.delegations().collect()
    roots = side.filter(pl.col("depth") == 0)["delegation_id"].to_list()
    found: dict[str, dict[str, set[str]]] = {}
    for root in roots:
        t = externalization(s, root).table
        for r in t.iter_rows(named=True):
            found[r["event_id"]] = {"all": set(r["ancestor_read_events"]),
                                    "trace": set(r["ancestor_event_ids"]),
                                    "lineage": set()}
    sub = set(side.filter(pl.col("depth") > 0)["delegation_id"].to_list())
    cim_rows = pl.concat([pl.read_parquet(s.root / f) for f in s.files])
    shares = cim_rows.filter((pl.col("event_kind") == "proposal")
                             & (pl.col("action_semantic") == "share")
                             & (pl.col("direction") == "external")
                             & pl.col("delegation_id").is_in(list(sub)))
    n = hit = tp = fn = fp = 0
    for eid in shares["event_id"].to_list():
        truth = gt.get(eid, set())
        got = found.get(eid, {}).get("all", set())
        if not truth:
            continue
        n += 1
        hit += bool(got & truth)
        tp += len(got & truth)
        fn += len(truth - got)
        fp += len(got - truth)
    return {"sub_agent_shares": shares.height, "with_upstream_reads": n,
            "share_recall": hit / n if n else float("nan"),
            "read_recall": tp / (tp + fn) if tp + fn else float("nan"),
            "read_precision": tp / (tp + fp) if tp + fp else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--store", type=Path, default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    store = a.store
    if store is None:
        store = Path(tempfile.mkdtemp(prefix="cim-q3-")) / "store"
        export_traces(a.traces, store)
    res = score(a.traces, store)
    for k, v in res.items():
        print(f"{k:22s} {v:.3f}" if isinstance(v, float) else f"{k:22s} {v}")
    print(f"seconds                {time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
