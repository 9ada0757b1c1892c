"""``containmentbench config show|check [OVERRIDES...]``: the composed study config."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="compose (Hydra) and validate a study configuration")
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    csub.required = True
    for name, helptext in (("show", "print the resolved config as YAML"),
                           ("check", "validate and print the config hash and shard count")):
        q = csub.add_parser(name, help=helptext)
        q.add_argument("overrides", nargs="*", help="e.g. study=full_main backend=vllm")
        q.set_defaults(func=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    import yaml

    from containmentbench.config.compose import config_hash, load_study
    from containmentbench.pipeline.plan import shards

    data = load_study(args.overrides)
    if args.action == "show":
        sys.stdout.write(yaml.safe_dump(data, sort_keys=True))
        return 0
    n = len(shards(data))
    print(f"config ok: study {data['study']['name']}, {n} shards, "
          f"sha256 {config_hash(data)}")
    return 0
