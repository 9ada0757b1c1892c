"""``containmentbench metrics TRACES_DIR --out FILE``: one row per rollout."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="compute per-rollout metrics from every trace shard "
                                       "below a folder")
    p.add_argument("traces", type=Path, help="folder holding trace shards (searched recursively)")
    p.add_argument("--out", type=Path, required=True, help="rollout_metrics.parquet to write")
    p.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    p.add_argument("--force", action="store_true",
                   help="redo the metrics of a frozen study (old bytes kept under "
                        ".replaced-N/; re-freeze after)")
    p.set_defaults(func=cmd_metrics)


def cmd_metrics(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import need_dir
    from containmentbench.config.bounds import check_value
    from containmentbench.integrity import writer
    from containmentbench.metrics.compute import compute_metrics, write_metrics
    from containmentbench.pipeline.mixing import check_traces

    check_value("workers", args.workers, "workers")
    need_dir(args.traces, "traces")
    writer.check_file(args.out, "metrics", args.force)
    t0 = time.perf_counter()
    check_traces(args.traces)  # never pool two models or configs
    table = compute_metrics(args.traces, args.workers)
    write_metrics(table, args.out, args.force)
    sim = "sim" in set(table.column("backend").to_pylist())
    print(f"wrote {args.out}: {table.num_rows} rollouts ({time.perf_counter() - t0:.1f} s)"
          + (" [simulated agent: harness validation, not a model result]" if sim else ""),
          file=sys.stderr)
    return 0
