"""``containmentbench verify DIR | study=NAME [key=value ...]``: recompute every hash in
MANIFEST.json (exit 1 on any mismatch, each named); a study's every run directory and its
``cross_model/``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check every file of a frozen study against MANIFEST.json")
    p.add_argument("target", nargs="*", metavar="DIR | study=NAME [key=value ...]",
                   help="a frozen study folder (a run directory or cross_model/), or the "
                        "study as Hydra overrides, e.g. study=full_main")
    from containmentbench.cli import argtypes as T

    p.add_argument("--expect-freeze", type=T.positive_int, default=None, metavar="N",
                   help="the freeze counter the manifest must carry (detects an older "
                        "manifest restored with its tables)")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    from containmentbench.cli import study_args

    dirs = study_args.run_dirs(args.target, "verify")
    cross = study_args.cross_dir(args.target)
    rc = 0
    for d in [*dirs, *([cross] if cross is not None else [])]:
        args.study = d
        rc = max(rc, _verify_one(args))
    return rc


def _verify_one(args: argparse.Namespace) -> int:
    from containmentbench.freeze.manifest import verify
    from containmentbench.integrity.keys import NO_KEY_NOTE, load_key

    key = load_key(args.study)
    problems = verify(args.study, key, args.expect_freeze)
    if key is None:
        print(f"verify: {_keyed_note(args.study) or NO_KEY_NOTE}", file=sys.stderr)
    for p in problems:
        print(f"MISMATCH {p}", file=sys.stderr)
    if problems:
        print(f"verify: {len(problems)} mismatch(es) in {args.study}", file=sys.stderr)
        return 1
    from containmentbench.integrity import frozen

    man = frozen.manifest_of(args.study)
    n = man[0].get("freeze") if man is not None else None
    print(f"verify: {args.study} matches its MANIFEST.json"
          + (f" (freeze {n})" if n is not None else ""), file=sys.stderr)
    return 0


def _keyed_note(study: Path) -> str | None:
    """A keyed manifest read without the key: which key it needs, and how to give it."""
    from containmentbench.integrity import frozen
    from containmentbench.integrity.keys import ENV_KEY_FILE

    man = frozen.manifest_of(study)
    auth = man[0].get("auth") if man is not None else None
    if not isinstance(auth, dict):
        return None
    return (f"{frozen.MANIFEST} is keyed (key id {auth.get('key_id')}) but no key is set: "
            f"only its hashes were checked, so only accidental corruption is detected; set "
            f"{ENV_KEY_FILE} to the file holding that key to check its MAC")
