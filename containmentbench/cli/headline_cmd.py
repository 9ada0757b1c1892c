"""``containmentbench headline RUN_DIR | study=NAME [key=value ...]``: the study's answer as a
short text table (``tables/headline.json``, ``analysis/headline.py``) and where its report is.

The study must pass ``verify`` first: a study whose bytes differ from its manifest gets no
headline, only a one-line error (``report/summary.py``). ``make run`` and every
``snakemake`` run of a study end with it.
"""

from __future__ import annotations

import argparse
import json
import sys

from containmentbench.cli import study_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("headline", help="print a verified study's headline: findings per "
                                        "defense with 95%% intervals and the claims in words")
    study_args.add(p, run_dir=True)
    p.add_argument("--json", action="store_true", help="print headline.json instead of text")
    p.set_defaults(func=cmd_headline)


def cmd_headline(args: argparse.Namespace) -> int:
    from containmentbench.report.summary import run_text, verified_doc

    dirs = study_args.run_dirs(args.target, "headline")
    for line in study_args.config_drift(args.target):
        print(f"containmentbench: {line}", file=sys.stderr)
    for i, d in enumerate(dirs):
        out = (json.dumps(verified_doc(d), indent=2, ensure_ascii=False) + "\n"
               if args.json else run_text(d))
        sys.stdout.write(("\n" if i else "") + out)
    cross = study_args.cross_dir(args.target)
    if cross is not None and not args.json:
        from containmentbench.analysis.cross_model import cross_text

        sys.stdout.write("\n" + cross_text(cross))
    return 0
