"""``containmentbench cases RUN_DIR``: Table 21 case-study pairs and the Table 28 audit."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cases", help="matched case-study pairs (Appendix D) and the integrity "
                                     "and safety audit (Appendix L, Table 28)")
    p.add_argument("run_dir", help="run directory (holds traces/ and metrics/)")
    p.add_argument("--metrics", default=None, help="rollout_metrics.parquet (default: in RUN_DIR)")
    p.add_argument("--out", default=None, help="tables folder (default: RUN_DIR/tables)")
    p.add_argument("--force", action="store_true",
                   help="redo the case tables of a frozen study (old bytes kept under "
                        ".replaced-N/; re-freeze after)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from containmentbench.integrity import writer
    from containmentbench.metrics.schema import check_metrics_file
    from containmentbench.report.write import check_cases_out, write_cases

    metrics = Path(args.metrics or Path(args.run_dir) / "metrics" / "rollout_metrics.parquet")
    if metrics.exists():  # a missing table is write_cases' one-line error
        check_metrics_file(metrics)
    check_cases_out(args.run_dir, args.out, args.force)  # before any work
    with writer.forcing(args.force):
        paths, checks = write_cases(args.run_dir, args.metrics, args.out)
    failed = checks.filter(checks["status"] == "fail")
    for r in checks.iter_rows(named=True):
        print(f"audit: {r['check']:<32} {r['status']:<8} {r['violations']}/{r['items_checked']}")
    print(f"cases: wrote {len(paths)} files to {paths[0].parent}")
    if failed.height:
        r = failed.row(0, named=True)
        print(f"containmentbench: error: integrity audit failed: {r['check']}: "
              f"{r['first_violation']}", file=sys.stderr)
        return 1
    return 0
