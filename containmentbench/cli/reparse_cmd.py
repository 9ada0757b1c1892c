"""``containmentbench reparse TRACES_DIR --out DIR``: re-parse stored raw completions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from containmentbench.cli.parse_cmd import add_config_flags, config_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reparse", help="re-parse stored raw completions with the current parser "
                                       "(no model call); per-action old/new status and a "
                                       "Table 24 summary")
    p.add_argument("traces", type=Path, help="a traces folder (finished shards below it)")
    p.add_argument("--out", type=Path, required=True, help="folder for reparse.parquet and "
                                                           "summary.json")
    p.add_argument("--force", action="store_true",
                   help="redo the output of a frozen study (old bytes kept under .replaced-N/)")
    add_config_flags(p)
    p.set_defaults(func=cmd_reparse)


def cmd_reparse(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import need_dir
    from containmentbench.parser.reparse import summary_markdown
    from containmentbench.parser.run import check_out, reparse_traces

    config = config_from(args)
    need_dir(args.traces, "traces")
    check_out(args.out, args.force)
    summary = reparse_traces(args.traces, args.out, config, force=args.force)
    print(summary_markdown(summary))
    print(f"wrote {args.out}: {summary['input_model_actions']} model actions, "
          f"{summary['n_changed']} changed", file=sys.stderr)
    return 0
