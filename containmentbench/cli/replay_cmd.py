"""``containmentbench replay``: scripted replay of reference plans into real trace files."""

from __future__ import annotations

import argparse
import sys

from containmentbench.cli.rollout_cmd import add_selection, run_and_write, select


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay reference plans (no model) into a trace shard")
    add_selection(p)
    p.add_argument("--plan", choices=("benign", "attacker"), default="benign",
                   help="replay the scenario's benign plan or its attacker plan")
    p.add_argument("--defense", default="none", help="the defense the replay runs under")
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from containmentbench.cli.rollout_cmd import prepare_out
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig
    from containmentbench.models.scripted import ScriptedBackend
    from containmentbench.runtime.driver import ShardContext
    from containmentbench.runtime.episode import RuntimeConfig

    prepare_out(args.out, args.force)
    scen = select(args.suite, args.stage, args.scenarios)
    backend = ScriptedBackend(BackendConfig("scripted", "scripted", options={"plan": args.plan}))
    ctx = ShardContext(args.study, f"scripted:{args.plan}", "scripted", args.defense, 0, None)
    res = run_and_write(scen, load_defense(args.defense), backend, ctx, RuntimeConfig(),
                        args.out, 512, True, args.force)
    print(f"wrote {args.out}: {res['rollouts']} replayed rollouts ({args.plan} plan)",
          file=sys.stderr)
    return 0
