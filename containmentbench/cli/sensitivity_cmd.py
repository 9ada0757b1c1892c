"""``containmentbench sensitivity METRICS_FILE --out FILE``: the sensitivity analyses
(Tables 13, 14, rule attribution), cached for ``analyze --sensitivity``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from containmentbench.cli.analyze_cmd import add_config_args, analysis_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sensitivity", help="stage contribution, denominator sensitivity and "
                                           "rule attribution (cached part of analyze)")
    p.add_argument("metrics", type=Path, help="rollout_metrics.parquet")
    p.add_argument("--out", type=Path, required=True, help="sensitivity.json to write")
    add_config_args(p)
    p.set_defaults(func=cmd_sensitivity)


def cmd_sensitivity(args: argparse.Namespace) -> int:
    from containmentbench.analysis.parts import read_frame, sensitivity_part, write_part
    from containmentbench.integrity import reading, writer

    t0 = time.perf_counter()
    cfg = analysis_config(args)
    writer.check_file(args.out, "sensitivity", args.force)  # before any work
    df = read_frame(args.metrics)
    reading.trusted(args.metrics)  # a frozen study's metrics: the frozen bytes only
    with writer.forcing(args.force):
        write_part("sensitivity", sensitivity_part(df, cfg), args.metrics, cfg, args.out)
    print(f"wrote {args.out} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0
