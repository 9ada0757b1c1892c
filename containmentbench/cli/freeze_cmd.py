"""``containmentbench freeze DIR``: write MANIFEST.json for a study folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("freeze", help="hash every table, figure, trace shard, scenario manifest "
                                      "and config of a study folder into MANIFEST.json")
    p.add_argument("study", type=Path, help="the run directory to freeze (results/<study>/<model>)")
    p.set_defaults(func=cmd_freeze)


def cmd_freeze(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import check_run_inputs
    from containmentbench.freeze.manifest import freeze

    check_run_inputs(args.study)
    m = freeze(args.study)
    print(f"wrote {args.study}/MANIFEST.json (freeze {m['freeze']}): {len(m['files'])} files "
          f"hashed, "
          f"{m['rollouts']} rollouts, git {str(m['git']['commit'])[:12]}"
          f"{' (dirty)' if m['git']['dirty'] else ''}"
          + (" [simulated agent: harness validation, not a model result]"
             if m["simulated_agent"] else ""), file=sys.stderr)
    return 0
