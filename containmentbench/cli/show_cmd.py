"""``containmentbench show ROLLOUT_ID [--run-dir DIR] [--json] [--raw]``: one rollout as a
timeline. Trace text is shown with control characters spelled out (``\\x1b``, ``\\u202e``)
so a hostile completion cannot drive the terminal; ``--raw`` prints the stored characters;
``--json`` escapes them as JSON does."""

from __future__ import annotations

import argparse

from containmentbench.cli import argtypes as T


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="one rollout as a readable timeline (or JSON)")
    p.add_argument("rollout_id", help="the rollout to show, e.g. r-0123456789abcdef (the report's rollout index lists every one)")
    p.add_argument("--run-dir", default=None, metavar="RUN_DIR",
                   help="the run directory holding traces/, results/<study>/<model> "
                        "(default: search results/)")
    p.add_argument("--results", default="results", help="where to search without --run-dir")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--width", type=T.positive_int, default=100,
                   help="text width of raw-text excerpts")
    p.add_argument("--raw", action="store_true",
                   help="print trace text as stored, terminal control sequences included "
                        "(default: control, bidi and zero-width characters as escapes)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from containmentbench.report.rundir import find_run_dir
    from containmentbench.report.timeline import dumps, render_text

    r = find_run_dir(args.rollout_id, args.run_dir, args.results).load(args.rollout_id)
    print(dumps(r) if args.json else render_text(r, args.width, args.raw))
    return 0
