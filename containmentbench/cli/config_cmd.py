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
        q.add_argument("overrides", nargs="*", metavar="study=NAME [key=value ...]",
                       help="Hydra overrides, e.g. study=full_main backend=vllm "
                            "model=qwen2_5_7b_instruct")
        q.set_defaults(func=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    import yaml

    from containmentbench.cli.study_args import overrides
    from containmentbench.config.compose import config_hash
    from containmentbench.models.serving import describe
    from containmentbench.pipeline.plan import jobs, model_label, shards
    from containmentbench.pipeline.runs import load_runs

    # every model entry validated up front
    runs = load_runs(overrides(args.overrides, f"config {args.action}"))
    if args.action == "show":
        for data in runs:
            if len(runs) > 1:
                sys.stdout.write(f"# model {model_label(data)}\n")
            sys.stdout.write(yaml.safe_dump(data, sort_keys=True))
        return 0
    for data in runs:
        sh = shards(data)
        print(f"config ok: study {data['study']['name']}, model {model_label(data)}, "
              f"{len(sh)} shards in {len(jobs(data, sh))} rollout jobs "
              f"(cluster.rollout_group={data['cluster']['rollout_group']}), "
              f"sha256 {config_hash(data)}; {describe(data)}")
    return 0
