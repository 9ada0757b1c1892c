"""``containmentbench bootstrap METRICS_FILE --out FILE``: every resampled interval (paired
comparisons, eq. 12; divergence, Table 10), cached for ``analyze --bootstrap``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from containmentbench.cli.analyze_cmd import add_config_args, analysis_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bootstrap", help="pair and scenario-cluster bootstrap intervals "
                                         "(cached part of analyze)")
    p.add_argument("metrics", type=Path, help="rollout_metrics.parquet")
    p.add_argument("--out", type=Path, required=True, help="bootstrap.json to write")
    add_config_args(p)
    p.set_defaults(func=cmd_bootstrap)


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from containmentbench.analysis.parts import bootstrap_part, read_frame, write_part
    from containmentbench.analysis.tables import Context
    from containmentbench.integrity import reading, writer

    t0 = time.perf_counter()
    cfg = analysis_config(args)
    writer.check_file(args.out, "bootstrap", args.force)  # before any work
    df = read_frame(args.metrics)
    reading.trusted(args.metrics)  # a frozen study's metrics: the frozen bytes only
    part = bootstrap_part(df, cfg, Context(df).defenses)
    with writer.forcing(args.force):
        write_part("bootstrap", part, args.metrics, cfg, args.out)
    print(f"wrote {args.out}: {part['intervals']} intervals x {part['resamples']} resamples "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 0
