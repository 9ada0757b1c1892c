"""``containmentbench metrics TRACES_DIR --out FILE``: one row per rollout."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from containmentbench.cli import argtypes as T


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="compute per-rollout metrics from every trace shard "
                                       "below a folder")
    p.add_argument("traces", type=Path, help="folder holding trace shards (searched recursively)")
    p.add_argument("--out", type=Path, required=True, help="rollout_metrics.parquet to write")
    p.add_argument("--workers", type=T.workers, default=None,
                   help="processes (default: cores)")
    p.add_argument("--force", action="store_true",
                   help="replace a different earlier metrics file (moved aside, never deleted)")
    p.set_defaults(func=cmd_metrics)


def cmd_metrics(args: argparse.Namespace) -> int:
    import os

    from containmentbench.cli.guards import is_parquet_table, need_dir
    from containmentbench.integrity.outdir import check_out_file, commit_file
    from containmentbench.metrics.compute import compute_metrics, write_metrics
    from containmentbench.pipeline.mixing import check_traces

    need_dir(args.traces, "traces")
    check_out_file(args.out, lambda p: is_parquet_table(p, "rollout_metrics"))
    t0 = time.perf_counter()
    check_traces(args.traces)  # never pool two models or configs
    table = compute_metrics(args.traces, args.workers)
    tmp = args.out.with_name(f".{args.out.name}.new-{os.getpid()}")
    write_metrics(table, tmp)
    commit_file(tmp, args.out, args.force)
    sim = "sim" in set(table.column("backend").to_pylist())
    print(f"wrote {args.out}: {table.num_rows} rollouts ({time.perf_counter() - t0:.1f} s)"
          + (" [simulated agent: harness validation, not a model result]" if sim else ""),
          file=sys.stderr)
    return 0
