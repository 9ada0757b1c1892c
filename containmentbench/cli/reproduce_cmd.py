"""``containmentbench reproduce RUN_DIR | study=NAME [key=value ...]``: rebuild metrics and
tables from cached traces only, check they are byte-identical to the frozen ones (exit 1
otherwise) and print the verdict (and, for a several-model study, the same for
``cross_model/``)."""

from __future__ import annotations

import argparse
import sys
import time

from containmentbench.cli import argtypes as T
from containmentbench.cli import study_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="recompute reparse, metrics and tables from the cached "
                                         "Parquet traces (no model, no GPU) and compare bytes")
    study_args.add(p, run_dir=True)
    p.add_argument("--workers", type=T.workers, default=None,
                   help="processes for the metrics (default: the machine's cores)")
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import check_run_inputs
    from containmentbench.freeze.manifest import reproduce

    dirs = study_args.run_dirs(args.target, "reproduce")
    bad = 0
    for d in dirs:
        t0 = time.perf_counter()
        check_run_inputs(d, analysis=True)
        res = reproduce(d, args.workers)
        for rel in res["differ"]:
            print(f"DIFFERS {rel}", file=sys.stderr)
        dt = time.perf_counter() - t0
        if res["differ"]:
            bad += 1
            print(f"reproduce: {d}: NOT reproduced: {len(res['differ'])} of {res['compared']} "
                  f"files differ ({dt:.1f} s)", file=sys.stderr)
        else:
            print(f"reproduce: {d}: reproduced: {res['compared']} files byte-identical to the "
                  f"frozen ones ({dt:.1f} s)", file=sys.stderr)
    cross = study_args.cross_dir(args.target)
    if cross is not None:
        from containmentbench.analysis.cross_model import reproduce_cross

        res = reproduce_cross(cross)
        if res["differ"]:
            bad += 1
        print(f"reproduce: {cross}: " + ("NOT reproduced: " + ", ".join(res["differ"])
                                         if res["differ"] else
                                         f"reproduced: {res['compared']} files byte-identical"),
              file=sys.stderr)
    return 1 if bad else 0
