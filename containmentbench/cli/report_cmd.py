"""``containmentbench report RUN_DIR``: the static HTML report of a study."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="static HTML report (tables, figures, drill-down, trace "
                                      "pages, case studies); opens from the file system")
    p.add_argument("run_dir", help="run directory (traces/, tables/, MANIFEST.json)")
    p.add_argument("--out", default=None, help="report folder (default: RUN_DIR/report)")
    p.add_argument("--force", action="store_true", help="replace a different earlier report "
                   "(moved aside to .<name>.replaced-<n>, never deleted)")
    p.add_argument("--before-freeze", action="store_true",
                   help="pipeline use: build before freeze hashes it (no MANIFEST check)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from containmentbench.metrics.schema import check_metrics_file
    from containmentbench.report.build import build_report

    metrics = Path(args.run_dir) / "metrics" / "rollout_metrics.parquet"
    if metrics.exists():  # checked before any page is rendered (one line naming a column)
        check_metrics_file(metrics)
    index = build_report(args.run_dir, args.out, args.before_freeze, args.force)
    print(index.resolve())
    return 0
