"""``containmentbench rollout`` (one shard with a model backend) and ``replay`` helpers."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError


def add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", required=True, help="suite name or folder")
    p.add_argument("--stage", default=None, help="security | memory_recovery | active_tainted | "
                                                 "clean (default: all stages)")
    p.add_argument("--scenarios", default=None, help="comma-separated scenario ids (a block)")
    p.add_argument("--out", type=Path, required=True, help="shard output folder")
    p.add_argument("--study", default="adhoc", help="study name recorded in the trace")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollout", help="run one shard: scenarios x one defense x seed x model")
    add_selection(p)
    p.add_argument("--defense", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--backend", default="sim", help="sim | vllm | openai | hf | scripted")
    p.add_argument("--model", default="sim", help="model id or path (label for sim)")
    p.add_argument("--sim-profile", default="default", help="sim profile name or YAML file")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option (repeatable), e.g. base_url=http://127.0.0.1:8000/v1")
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--window", type=int, default=512, help="episodes in flight")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_rollout)


def parse_options(items: list[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise BenchError(f"expected KEY=VALUE, got '{it}'", field="option")
        k, v = it.split("=", 1)
        out[k.strip()] = yaml.safe_load(v)
    return out


def select(suite: str, stage: str | None, ids: str | None) -> list[Any]:
    from containmentbench.scenarios.manifest import load_suite

    scen = load_suite(suite, stage)
    if ids:
        want = [x.strip() for x in ids.split(",") if x.strip()]
        by_id = {s.id: s for s in scen}
        missing = [w for w in want if w not in by_id]
        if missing:
            raise BenchError(f"unknown scenario id '{missing[0]}' in suite '{suite}'"
                             + (f" stage '{stage}'" if stage else ""), field="scenarios")
        scen = [by_id[w] for w in want]
    if not scen:
        raise BenchError("the selection holds no scenarios", field="scenarios")
    return scen


def run_and_write(scenarios: list[Any], policy: Any, backend: Any, ctx: Any, cfg: Any,
                  out: Path, window: int, quiet: bool) -> dict[str, Any]:
    from containmentbench.runtime.driver import Progress, run_episodes, shard_tables
    from containmentbench.trace.io import write_shard

    t0 = time.perf_counter()
    prog = None if quiet else Progress(len(scenarios), f"rollout {ctx.defense} s{ctx.seed}")
    eps, wall, model_s = run_episodes(scenarios, policy, backend, ctx, cfg, window, prog)
    tables = shard_tables([e for e in eps if e is not None], ctx, policy,
                          getattr(backend, "seed_supported", False), wall, model_s)
    write_shard(out, tables)
    dt = time.perf_counter() - t0
    n_actions = sum(e.counts["model_calls"] for e in eps if e is not None)
    status = {}
    for e in eps:
        if e is not None:
            status[e.status] = status.get(e.status, 0) + 1
    return {"rollouts": len(eps), "actions": n_actions, "seconds": dt, "status": status}


def cmd_rollout(args: argparse.Namespace) -> int:
    from containmentbench.models.base import BackendConfig, make_backend
    from containmentbench.policies import load_policy
    from containmentbench.runtime.driver import ShardContext
    from containmentbench.runtime.episode import RuntimeConfig

    scen = select(args.suite, args.stage, args.scenarios)
    policy = load_policy(args.defense)
    options = parse_options(args.option)
    profile = None
    if args.backend == "sim":
        options.setdefault("profile", args.sim_profile)
        from containmentbench.models.sim import load_profile
        profile = load_profile(options["profile"]).name
    backend = make_backend(BackendConfig(name=args.backend, model=args.model,
                                         max_tokens=args.max_tokens,
                                         temperature=args.temperature, options=options))
    model = f"sim:{profile}" if args.backend == "sim" and args.model == "sim" else args.model
    ctx = ShardContext(args.study, model, args.backend, args.defense, args.seed, profile)
    cfg = RuntimeConfig(max_steps=args.max_steps, max_tokens=args.max_tokens,
                        temperature=args.temperature)
    try:
        res = run_and_write(scen, policy, backend, ctx, cfg, args.out, args.window, args.quiet)
    finally:
        backend.close()
    label = " [simulated agent: harness validation, not a model result]" \
        if args.backend == "sim" else ""
    print(f"wrote {args.out}: {res['rollouts']} rollouts, {res['actions']} actions in "
          f"{res['seconds']:.2f} s, status {res['status']}{label}", file=sys.stderr)
    return 0
