"""``containmentbench <verb>``: one command per pipeline step.

Every verb turns bad input into one line on stderr naming the file, line or field, and exit
status 2, before anything is written (``BenchError``); verification failures exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from containmentbench import __version__
from containmentbench.errors import BenchError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


# verb modules, each exposing register(subparsers); imported lazily so `--help` stays fast
# and heavy optional packages are only touched by the verbs that need them.
VERBS = ("scenarios", "replay", "rollout", "parse", "reparse", "metrics", "analyze", "freeze",
         "verify", "reproduce", "status", "cim", "config", "show", "cases", "report",
         "cross_model")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    p = _Parser(prog="containmentbench",
                description="Trace-based evaluation of post-injection containment.")
    p.add_argument("--version", action="version", version=f"containmentbench {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for verb in VERBS:
        try:
            mod = importlib.import_module(f"containmentbench.cli.{verb}_cmd")
        except ModuleNotFoundError as exc:
            if exc.name == f"containmentbench.cli.{verb}_cmd":
                continue  # verb not built yet
            raise
        mod.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (exit 2) and --help (exit 0)
        return int(exc.code or 0)
    try:
        rc = args.func(args)
    except BenchError as exc:
        print(f"containmentbench: error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("containmentbench: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())
