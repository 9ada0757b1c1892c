"""``containmentbench rollout`` (one shard with a model backend) and ``replay`` helpers."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from containmentbench.cli import argtypes as T
from containmentbench.errors import BenchError


def add_selection(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--suite", required=required, help="suite name or folder")
    p.add_argument("--stage", default=None, help="security | memory_recovery | active_tainted | "
                                                 "clean (default: all stages)")
    p.add_argument("--scenarios", default=None, help="comma-separated scenario ids (a block)")
    p.add_argument("--out", type=Path, required=required, help="shard output folder")
    p.add_argument("--study", default="adhoc", help="study name recorded in the trace")
    p.add_argument("--force", action="store_true",
                   help="replace an earlier, different shard at --out (it is moved aside to "
                        ".<name>.replaced-<n>, never deleted)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rollout", help="run one shard: scenarios x one defense x seed x model",
                       description="Either give --suite/--defense/--seed/--backend/--model "
                                   "directly, or --study-config (a resolved study config) and "
                                   "--shard (a shard id of that study).")
    add_selection(p, required=False)
    p.add_argument("--defense", help="one of the seven defenses (containmentbench list defenses)")
    p.add_argument("--seed", type=T.seed, help="rollout seed")
    p.add_argument("--study-config", type=Path, default=None,
                   help="resolved study config (results/<study>/config.yaml)")
    p.add_argument("--shard", default=None, help="shard id, e.g. sim-default/none/seed=1/"
                                                 "security/shard-000")
    p.add_argument("--job", default=None,
                   help="rollout job of the study (cluster.rollout_group), e.g. seed-1: "
                        "loads the backend once and runs every unfinished shard of the job")
    p.add_argument("--backend", default="sim", help="sim | vllm | openai | hf | scripted")
    p.add_argument("--model", default="sim", help="model id or path (label for sim)")
    p.add_argument("--sim-profile", default="default", help="sim profile name or YAML file")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option (repeatable), e.g. base_url=http://127.0.0.1:8000/v1")
    p.add_argument("--max-steps", type=T.config_range("runtime.max_steps"), default=60,
                   help="runtime.max_steps per rollout")
    p.add_argument("--max-tokens", type=T.config_range("decoding.max_tokens"), default=512,
                   help="decoding.max_tokens")
    p.add_argument("--temperature", type=T.config_range("decoding.temperature", float),
                   default=0.7,
                   help="decoding.temperature (0: greedy; the seed then changes nothing)")
    p.add_argument("--top-p", type=T.probability, default=0.95, help="decoding.top_p")
    p.add_argument("--tool-mode", default="prompt", choices=("prompt", "native", "constrained"),
                   help="prompt: our format, schemas once in the system prompt; native: the "
                        "model's chat template renders the tools; constrained: prompt mode "
                        "with decoding limited to one valid action (vllm, openai)")
    p.add_argument("--tools-offered", default="all", choices=("all", "domain"),
                   help="tools offered per agent (study.tools_offered): all of its role's, or "
                        "its scenario's domain tools (a suite whose plans need more: exit 2)")
    p.add_argument("--window", type=T.config_range("backend.window"), default=512,
                   help="episodes in flight")
    p.add_argument("--parser", default="current", choices=("current", "legacy"),
                   help="parser the agent's actions are read with (study.parser; Table 24)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--progress-fd", type=T.non_negative_int, default=None, metavar="FD",
                   help="also write the job's progress (done/total, rate, ETA; every "
                        "CB_PROGRESS_INTERVAL s) to this open file descriptor: rule rollout "
                        "passes the Snakemake run's terminal (3 3>&2) while its log gets "
                        "everything")
    p.set_defaults(func=cmd_rollout)


def _terminal(fd: int | None) -> Any:
    """The stream of ``--progress-fd`` (never closed here: it is the caller's)."""
    if fd is None:
        return None
    import os

    try:
        os.fstat(fd)
        return os.fdopen(fd, "w", buffering=1, closefd=False)
    except (OSError, ValueError):
        raise BenchError(f"file descriptor {fd} is not open", field="progress-fd") from None


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
    from containmentbench.scenarios.manifest import check_stage_files, load_scenarios, load_suite

    if ids:  # validate the selected scenarios only (a one-shard job's fixed cost)
        want = [x.strip() for x in ids.split(",") if x.strip()]
        scen = load_scenarios(suite, stage, want) if want else []
    else:
        check_stage_files(suite, stage)  # never roll out an edited suite
        scen = load_suite(suite, stage)
    if not scen:
        raise BenchError("the selection holds no scenarios", field="scenarios")
    return scen


def run_and_write(scenarios: list[Any], policy: Any, backend: Any, ctx: Any, cfg: Any,
                  out: Path, window: int, quiet: bool, force: bool = False) -> dict[str, Any]:
    from containmentbench.runtime.driver import Progress, run_episodes, shard_tables
    from containmentbench.trace.io import write_shard

    t0 = time.perf_counter()
    prog = None if quiet else Progress(len(scenarios), f"rollout {ctx.defense} s{ctx.seed}")
    eps, wall, model_s = run_episodes(scenarios, policy, backend, ctx, cfg, window, prog)
    from containmentbench.runtime.job import is_context_overflow

    failed = [e for e in eps if e is not None and e.status == "error"
              and not is_context_overflow(e.error)]
    if failed:  # errors are never outcomes: an ad-hoc shard tolerates none
        raise BenchError(f"{len(failed)}/{len(eps)} rollouts ended in a provider error "
                         f"(first: {failed[0].error}); shard not written", file=str(out))
    tables = shard_tables([e for e in eps if e is not None], ctx, policy,
                          getattr(backend, "seed_supported", False), wall, model_s)
    write_shard(out, tables, force=force)
    dt = time.perf_counter() - t0
    n_actions = sum(e.counts["model_calls"] for e in eps if e is not None)
    status = {}
    for e in eps:
        if e is not None:
            status[e.status] = status.get(e.status, 0) + 1
    return {"rollouts": len(eps), "actions": n_actions, "seconds": dt, "status": status}


def _read_study(path: Path) -> tuple[dict[str, Any], list[Any] | None]:
    """The resolved config and, when the pre-flight wrote a plan for these exact config and
    suite bytes (pipeline/planfile.py), its shards; otherwise the shards are planned afresh."""
    from containmentbench.pipeline.planfile import read_plan

    planned = read_plan(path)
    if planned is not None:
        return planned
    from containmentbench.config.compose import read_resolved

    return read_resolved(path), None


def _from_study(args: argparse.Namespace) -> dict[str, Any]:
    from containmentbench.pipeline.plan import model_label, shard_by_id, shard_dir

    if not args.shard:
        raise BenchError("--study-config needs --shard", field="shard")
    data, planned = _read_study(args.study_config)
    shard = shard_by_id(data, args.shard, planned)
    from containmentbench.runtime.job import backend_config

    b, dec = data["backend"], data["decoding"]
    options = backend_config(data).options  # the one place that completes backend options
    return {"suite": data["study"]["suite"], "stage": shard.stage,
            "scenarios": ",".join(shard.scenario_ids), "defense": shard.defense,
            "seed": shard.seed, "backend": b["name"],
            "model": data["model"]["path"] or data["model"]["name"],
            "label": model_label(data), "study": data["study"]["name"], "options": options,
            "max_tokens": dec["max_tokens"], "temperature": dec["temperature"],
            "top_p": dec["top_p"], "seed_policy": dec["seed_policy"],
            "tool_mode": b.get("tool_mode", "prompt"),
            "tools_offered": data["study"].get("tools_offered", "all"),
            "window": b["window"], "runtime": data["runtime"],
            "defenses": data["defenses"], "parser": data["study"].get("parser", "current"),
            "out": args.out or shard_dir(data, shard)}


def _from_args(args: argparse.Namespace) -> dict[str, Any]:
    for name in ("suite", "out", "defense", "seed"):
        if getattr(args, name) is None:
            raise BenchError(f"--{name} is required (or use --study-config and --shard)",
                             field=name)
    options = parse_options(args.option)
    if args.backend == "sim":
        options.setdefault("profile", args.sim_profile)
    label = args.model
    if args.backend == "sim" and args.model == "sim":
        from containmentbench.models.sim import load_profile
        label = f"sim:{load_profile(options['profile']).name}"
    return {"suite": args.suite, "stage": args.stage, "scenarios": args.scenarios,
            "defense": args.defense, "seed": args.seed, "backend": args.backend,
            "model": args.model, "label": label, "study": args.study, "options": options,
            "max_tokens": args.max_tokens, "temperature": args.temperature,
            "top_p": args.top_p, "seed_policy": "replicates", "tool_mode": args.tool_mode,
            "tools_offered": args.tools_offered,
            "window": args.window,
            "runtime": {"max_steps": args.max_steps},
            "defenses": None, "parser": args.parser, "out": args.out}


def prepare_out(out: Path, force: bool) -> None:
    """Before any episode runs: refuse an --out that is not a shard folder (or a frozen
    study's shard, without --force), then clean what a killed run of this shard left
    (integrity.writer: only our own temporaries)."""
    from containmentbench.integrity import writer
    from containmentbench.trace.io import CHECKSUMS, verify_shard

    writer.check_out(out, "shard", force)
    writer.clean_leftovers(out, complete=lambda d: (d / CHECKSUMS).exists()
                           and not verify_shard(d))


def check_bounds(r: dict[str, Any]) -> None:
    """The ranges of the typed config (config/bounds.py), for the flags that set them."""
    from containmentbench.config.bounds import check_value

    check_value("backend.window", r["window"], "window")
    check_value("runtime.max_steps", r["runtime"].get("max_steps"), "max-steps")
    check_value("study.seeds", r["seed"], "seed")
    check_value("decoding.max_tokens", r["max_tokens"], "max-tokens")
    check_value("decoding.temperature", r["temperature"], "temperature")
    check_value("decoding.top_p", r["top_p"], "top-p")


def _run_study_job(args: argparse.Namespace) -> int:
    """``--study-config`` with ``--job`` (or ``--shard`` without ``--out``): the job path."""
    from containmentbench.pipeline.plan import Job, job_by_name, model_slug, shard_by_id
    from containmentbench.runtime.job import run_job

    data, planned = _read_study(args.study_config)
    if args.job:
        job, marker = job_by_name(data, args.job, planned), True
    else:
        job = Job(model_slug(data), args.shard, (shard_by_id(data, args.shard, planned),))
        marker = False
    res = run_job(data, job, quiet=args.quiet, write_marker=marker,
                  terminal=_terminal(args.progress_fd))
    label = " [simulated agent: harness validation, not a model result]" \
        if data["backend"]["name"] == "sim" else ""
    print(f"job {job.name}: {len(job.shards)} shards: ran {len(res.done) + len(res.errored)}, "
          f"skipped {len(res.skipped)} (finished), errored {len(res.errored)}; backend loads "
          f"{res.loads}, load {res.load_s:.2f} s of {res.wall_s:.2f} s "
          f"({100 * res.load_share:.1f}%){label}", file=sys.stderr)
    if res.tally is not None:  # the job log's last figures (pipeline/throughput.py)
        from containmentbench.pipeline.throughput import line

        print(f"job {job.name} throughput: {line(res.tally.record())}", file=sys.stderr)
    if res.errored:
        print(f"containmentbench: error: {len(res.errored)} shard(s) errored: "
              f"{', '.join(res.errored)}", file=sys.stderr)
        return 1
    return 0


def cmd_rollout(args: argparse.Namespace) -> int:
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig, make_backend
    from containmentbench.runtime.driver import ShardContext
    from containmentbench.runtime.episode import RuntimeConfig

    if args.study_config and (args.job or (args.shard and args.out is None)):
        return _run_study_job(args)
    if args.job:
        raise BenchError("--job needs --study-config", field="job")
    r = _from_study(args) if args.study_config else _from_args(args)
    check_bounds(r)
    out = Path(r["out"])
    scen = select(r["suite"], r["stage"], r["scenarios"])
    from containmentbench.scenarios.toolsets import check_suite

    check_suite(scen, r["tools_offered"], str(r["suite"]))  # before anything is written
    prepare_out(out, args.force)
    policy = load_defense(r["defense"], r["defenses"])
    profile = r["options"].get("profile") if r["backend"] == "sim" else None
    from containmentbench.parser.modes import parser_for

    cfg = RuntimeConfig(max_tokens=r["max_tokens"], temperature=r["temperature"],
                        top_p=r["top_p"], seed_policy=r["seed_policy"],
                        parser=parser_for(r["parser"]),
                        tool_mode=r["tool_mode"], tools_offered=r["tools_offered"],
                        **{k: v for k, v in r["runtime"].items()
                           if k in RuntimeConfig.__dataclass_fields__})
    if r["tool_mode"] == "constrained" and r["backend"] not in ("vllm", "openai"):
        raise BenchError(f"backend '{r['backend']}' cannot constrain decoding (tool_mode "
                         f"constrained needs vllm or openai)", field="tool-mode")
    backend = make_backend(BackendConfig(name=r["backend"], model=r["model"],
                                         max_tokens=r["max_tokens"],
                                         temperature=r["temperature"], top_p=r["top_p"],
                                         options=r["options"], tool_mode=r["tool_mode"]))
    ctx = ShardContext(r["study"], r["label"], r["backend"], r["defense"], int(r["seed"]),
                       profile)
    try:
        res = run_and_write(scen, policy, backend, ctx, cfg, out, r["window"], args.quiet,
                            args.force)
    finally:
        backend.close()
    label = " [simulated agent: harness validation, not a model result]" \
        if r["backend"] == "sim" else ""
    print(f"wrote {out}: {res['rollouts']} rollouts, {res['actions']} actions in "
          f"{res['seconds']:.2f} s, status {res['status']}{label}", file=sys.stderr)
    return 0
