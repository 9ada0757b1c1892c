"""Synthetic telemetry at scale: generator throughput and Q1-Q3 wall time (paper 002 §7.1, §7.4).

Generates ``--events`` rows of W1-W3 telemetry (Table 4 parameters; delegations/day chosen so
the total matches) with ``--jobs`` worker processes, then times delegation-scoped queries on
``--threads`` polars threads: Q1 blast radius and Q2 agent attribution and Q3
externalization (with causal ancestry), each over the lineage closure, for sampled roots of
every workflow plus the largest W2 families. Target (issue 7): <= 5 s per query at 100M
events on 2 cores. Each query opens the store afresh (side-table lookup included).

    .venv/bin/python bench/cim_scale.py --events 100000000 --out /tmp/cim_scale --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=100_000_000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/cim_scale"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="POLARS_MAX_THREADS for queries")
    ap.add_argument("--reuse", action="store_true", help="keep an existing store of that size")
    ap.add_argument("--queries", type=int, default=8, help="sampled roots per workflow")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk-events", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the store afterwards")
    ap.add_argument("--json", type=Path, default=None)
    return ap.parse_args()


def main() -> int:
    args = _args()
    os.environ["POLARS_MAX_THREADS"] = str(args.threads)  # before polars is imported
    import polars as pl

    from containmentbench.cim.generator import GenParams, generate, mean_calls
    from containmentbench.cim.queries import agent_attribution, blast_radius, externalization
    from containmentbench.cim.store import Store

    rows_per_delegation = sum(mean_calls(GenParams(), w) + 1.0 for w in ("W1", "W2", "W3"))
    d_day = max(1, round(args.events / rows_per_delegation))
    params = GenParams(delegations_per_day=d_day, seed=args.seed,
                       chunk_events=args.chunk_events)
    out: dict[str, object] = {"target_events": int(args.events), "delegations_per_day": d_day,
                              "jobs": args.jobs, "threads": args.threads,
                              "cpus": os.cpu_count()}
    man = args.out / "manifest.json"
    if args.reuse and man.exists() and \
            json.loads(man.read_text())["params"]["delegations_per_day"] == d_day:
        print(f"reusing {args.out}")
    else:
        print(f"generating ~{args.events:,.0f} events ({d_day:,} delegations/day per workflow,"
              f" {args.jobs} jobs) into {args.out}", flush=True)
        s = generate(params, args.out, jobs=args.jobs, progress=True)
        out.update(gen_events=s.n_events, gen_seconds=round(s.seconds, 1),
                   gen_events_per_s=round(s.events_per_s), bytes_per_event=round(
                       s.bytes_per_event, 2), disk_bytes=s.bytes, n_files=s.n_files,
                   n_delegations=s.n_delegations)
        print(f"generated {s.n_events:,} events, {s.n_delegations:,} delegations, "
              f"{s.n_files} files in {s.seconds:.1f} s: {s.events_per_s:,.0f} events/s, "
              f"{s.bytes_per_event:.1f} bytes/event, {s.bytes / 1e9:.2f} GB", flush=True)
    store = Store(args.out)
    side = store.delegations()
    total = int(pl.scan_parquet([store.root / f for f in store.files]).select(pl.len())
                .collect().item())
    out["events_on_disk"] = total
    roots = side.filter(pl.col("depth") == 0).select("delegation_id", "workflow").collect()
    picks: list[str] = []
    for w in ("W1", "W2", "W3"):
        ids = roots.filter(pl.col("workflow") == w)["delegation_id"]
        if ids.len():
            picks += ids.sample(min(args.queries, ids.len()), seed=args.seed).to_list()
    big = (side.filter(pl.col("workflow") == "W2").group_by("root_delegation_id").len()
           .sort("len", descending=True).head(3).collect())
    picks += big["root_delegation_id"].to_list()
    queries = {"Q1 blast-radius": blast_radius, "Q2 agents": agent_attribution,
               "Q3 externalization": externalization}
    timings: dict[str, list[float]] = {q: [] for q in queries}
    closure_rows: list[int] = []
    for d in picks:
        for name, fn in queries.items():
            t0 = time.perf_counter()
            res = fn(Store(args.out), d)
            timings[name].append(time.perf_counter() - t0)
            if name.startswith("Q1"):
                closure_rows.append(len(res.info["closure"]))
    print(f"\nqueries over {total:,} events, {len(picks)} delegations (closures up to "
          f"{max(closure_rows)} delegations), POLARS_MAX_THREADS={args.threads}:")
    summary = {}
    for name, ts in timings.items():
        ts_sorted = sorted(ts)
        p95 = ts_sorted[min(len(ts) - 1, round(0.95 * (len(ts) - 1)))]
        summary[name] = {"median_s": round(statistics.median(ts), 4), "p95_s": round(p95, 4),
                         "max_s": round(max(ts), 4), "n": len(ts)}
        print(f"  {name:<20} median {statistics.median(ts):.3f} s   p95 {p95:.3f} s   "
              f"max {max(ts):.3f} s   (target <= 5 s: "
              f"{'PASS' if max(ts) <= 5 else 'FAIL'})")
    out["queries"] = summary
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    if not args.keep and not args.reuse:
        shutil.rmtree(args.out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
