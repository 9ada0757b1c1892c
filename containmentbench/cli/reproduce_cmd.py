"""``containmentbench reproduce DIR``: rebuild metrics and tables from cached traces only and
check they are byte-identical to the frozen ones (exit 1 otherwise)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from containmentbench.cli import argtypes as T


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="recompute reparse, metrics and tables from the cached "
                                         "Parquet traces (no model, no GPU) and compare bytes")
    p.add_argument("study", type=Path)
    p.add_argument("--workers", type=T.workers, default=None)
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import check_run_inputs
    from containmentbench.freeze.manifest import reproduce

    t0 = time.perf_counter()
    check_run_inputs(args.study, analysis=True)
    res = reproduce(args.study, args.workers)
    for rel in res["differ"]:
        print(f"DIFFERS {rel}", file=sys.stderr)
    dt = time.perf_counter() - t0
    if res["differ"]:
        print(f"reproduce: {len(res['differ'])} of {res['compared']} files differ ({dt:.1f} s)",
              file=sys.stderr)
        return 1
    print(f"reproduce: {res['compared']} files byte-identical to the frozen ones ({dt:.1f} s)",
          file=sys.stderr)
    return 0
