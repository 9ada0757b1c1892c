"""``containmentbench parse``: JSON lines in, one parse result per line out."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parse", help='parse model outputs: stdin JSON lines {"text": ..., '
                                     '"tools": [...]} -> stdout JSON lines with calls, status, '
                                     'repaired, repairs')
    add_config_flags(p)
    p.set_defaults(func=cmd_parse)


def add_config_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--strict", action="store_true", help="strict JSON only, no repairs")
    g.add_argument("--legacy", action="store_true",
                   help="the old parser: anything but strict JSON is a final answer")
    p.add_argument("--disable", action="append", default=[], metavar="REPAIR",
                   help="disable one repair kind (repeatable)")


def config_from(args: argparse.Namespace):
    from containmentbench.errors import BenchError
    from containmentbench.parser import DEFAULT_CONFIG, ParserConfig
    from containmentbench.parser.core import REPAIR_KINDS

    cfg = ParserConfig.strict() if args.strict else ParserConfig.legacy() if args.legacy \
        else DEFAULT_CONFIG
    for kind in args.disable:
        if kind not in REPAIR_KINDS:
            raise BenchError(f"unknown repair kind '{kind}'", field="disable")
    return cfg.without(*args.disable) if args.disable else cfg


def cmd_parse(args: argparse.Namespace) -> int:
    from containmentbench.parser.stream import parse_stream

    parse_stream(sys.stdin, sys.stdout, config_from(args))
    return 0
