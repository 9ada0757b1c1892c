"""``containmentbench freeze DIR [--key | --new-identity]``: write MANIFEST.json for a study
folder (``freeze/sealing.py`` says what is checked before it signs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "freeze", help="hash every table, figure, trace shard, scenario manifest and config of "
                       "a study folder into MANIFEST.json",
        description="Freeze a study: hash every covered file into MANIFEST.json, after "
                    "checking that every file changed since the last freeze was rebuilt by a "
                    "verb (the study's journal). With CONTAINMENTBENCH_KEY_FILE (or "
                    "CONTAINMENTBENCH_KEY) set, the manifest carries one HMAC and this "
                    "machine records the study's identity and freeze counter outside the "
                    "folder, so deleting the manifests resets neither.")
    p.add_argument("study", type=Path, help="the run directory to freeze (results/<study>/<model>)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--key", action="store_true",
                     help="key a study frozen without a key: set CONTAINMENTBENCH_KEY_FILE "
                          "first; the study must still match its manifest (or be rebuilt on "
                          "its journal); a new, signed freeze follows, journalled as the keying")
    how.add_argument("--new-identity", action="store_true",
                     help="start a new study identity at freeze 1 here, deliberately (this "
                          "machine's record of the folder's earlier identity is set aside): "
                          "for a study rebuilt from scratch after its manifests were removed")
    p.set_defaults(func=cmd_freeze)


def cmd_freeze(args: argparse.Namespace) -> int:
    from containmentbench.cli.guards import check_run_inputs
    from containmentbench.freeze.manifest import freeze
    from containmentbench.integrity import writer

    check_run_inputs(args.study)
    writer.lock_study(args.study)  # no verb writes into the study while it is hashed
    m = freeze(args.study, new_identity=args.new_identity, key=args.key)
    print(f"wrote {args.study}/MANIFEST.json (freeze {m['freeze']}, study {m['study_id']}"
          f"{', keyed' if 'auth' in m else ''}): {len(m['files'])} files hashed, "
          f"{m['rollouts']} rollouts, git {str(m['git']['commit'])[:12]}"
          f"{' (dirty)' if m['git']['dirty'] else ''}"
          + (" [simulated agent: harness validation, not a model result]"
             if m["simulated_agent"] else ""), file=sys.stderr)
    return 0
