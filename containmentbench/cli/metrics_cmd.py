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
    p.add_argument("--study-config", type=Path, default=None,
                   help="resolved study config (<run dir>/config.yaml): read only the shards "
                        "its plan lists, each of which must be finished")
    p.add_argument("--force", action="store_true",
                   help="redo the metrics of a frozen study (old bytes kept under "
                        ".replaced-N/; re-freeze after)")
    p.set_defaults(func=cmd_metrics)


def cmd_metrics(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import need_dir
    from containmentbench.integrity import writer
    from containmentbench.metrics.compute import compute_metrics, write_metrics
    from containmentbench.pipeline.mixing import check_traces

    need_dir(args.traces, "traces")
    writer.check_file(args.out, "metrics", args.force)
    t0 = time.perf_counter()
    ids = None
    if args.study_config is not None:
        from containmentbench.metrics.compute import planned_shards

        ids = planned_ids(args.study_config)
        check_traces(args.traces, planned_shards(args.traces, ids))
    else:
        check_traces(args.traces)  # never pool two models or configs
    table = compute_metrics(args.traces, args.workers, shard_ids=ids)
    write_metrics(table, args.out, args.force)
    sim = "sim" in set(table.column("backend").to_pylist())
    print(f"wrote {args.out}: {table.num_rows} rollouts ({time.perf_counter() - t0:.1f} s)"
          + (" [simulated agent: harness validation, not a model result]" if sim else ""),
          file=sys.stderr)
    return 0


def planned_ids(config: Path) -> list[str]:
    """The shard ids a resolved study config plans (from its plan file when it is current)."""
    from containmentbench.pipeline.planfile import read_plan

    planned = read_plan(config)
    if planned is not None:
        return [s.id for s in planned[1]]
    from containmentbench.config.compose import read_resolved
    from containmentbench.pipeline.plan import shards

    return [s.id for s in shards(read_resolved(config))]
