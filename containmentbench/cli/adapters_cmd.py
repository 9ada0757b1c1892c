"""``containmentbench adapters ...``: external benchmarks through our gateway (paper 000 §6.4).

    adapters agentdojo --suite workspace --defense none --seed 1 --out DIR
        [--pipeline ground_truth|BACKEND] [--user-tasks ...] [--injection-tasks ...]
    adapters agentdojo --study-config results/<study>/config.yaml --shard ID
        --qualification Q.json --out DIR                      (a study shard, Snakemake)
    adapters agentdojo-qualify --suite S --seeds 1,2,3 --out Q.json   (clean qualification)
    adapters metrics TRACES --out rollout_metrics.parquet
    adapters parity TRACES --out parity.json                 (parity counts; exit 1 on a gap)
    adapters agentdojo-screen --study-config C --suite S --out DIR
                                 (the broader no-defense screen of the whole pool, Table 20)
    adapters table20 RUN_DIR     (Table 20's staged rows from the qualification, the matrix
                                  and the screen; tables/table20_agentdojo_qualification.*)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from containmentbench.cli import argtypes as T
from containmentbench.errors import BenchError


def _ids(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _seeds(text: str) -> list[int]:
    """``--seeds 1,2,3``: distinct seeds in the study's seed range (config/bounds.py)."""
    seeds: list[int] = []
    for x in _ids(text) or []:
        try:
            s = int(T.seed(x))
        except argparse.ArgumentTypeError as exc:
            raise BenchError(str(exc), field="seeds") from None
        if s in seeds:
            raise BenchError(f"seed {s} is listed twice", field="seeds")
        seeds.append(s)
    if not seeds:
        raise BenchError("at least one seed", field="seeds")
    return seeds


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("adapters", help="external benchmarks (AgentDojo) through our gateway")
    s = p.add_subparsers(dest="adapter_verb", metavar="ADAPTER_VERB")
    s.required = True

    a = s.add_parser("agentdojo", help="one shard: an AgentDojo suite x defense x seed")
    a.add_argument("--suite", help="workspace | slack | banking | travel")
    a.add_argument("--pipeline", default="ground_truth",
                   help="ground_truth (no model), openai (any OpenAI-compatible server) or "
                        "vllm (the engine in this process)")
    a.add_argument("--defense", help="one of the seven defenses (containmentbench list defenses)")
    a.add_argument("--seed", type=T.seed, help="rollout seed")
    a.add_argument("--out", type=Path, required=True, help="shard output folder")
    a.add_argument("--study", default="adhoc", help="study name recorded in the trace")
    a.add_argument("--model", default=None, help="served model name (openai), or a model folder "
                                                 "or pypi: package (vllm)")
    a.add_argument("--base-url", default="http://127.0.0.1:8000/v1",
                   help="OpenAI-compatible server of a served model")
    a.add_argument("--temperature", type=T.config_range("decoding.temperature", float),
                   default=0.7,
                   help="decoding of a served model (sent as given, seeded per request)")
    a.add_argument("--top-p", type=T.probability, default=0.95, help="decoding.top_p")
    a.add_argument("--max-tokens", type=T.config_range("decoding.max_tokens"), default=512,
                   help="decoding.max_tokens")
    a.add_argument("--user-tasks", default=None, help="comma-separated user task ids")
    a.add_argument("--max-user-tasks", type=T.non_negative_int, default=0,
                   help="first N user tasks (0 = all)")
    a.add_argument("--injection-tasks", default=None, help="comma-separated injection task ids")
    a.add_argument("--stages", default="clean,security",
                   help="comma-separated stages to run (clean, security)")
    a.add_argument("--attack", default="direct", help="an AgentDojo attack name")
    a.add_argument("--no-native", action="store_true",
                   help="skip the AgentDojo-alone run (no parity labels)")
    a.add_argument("--study-config", type=Path, default=None,
                   help="resolved study config (with --shard: one shard of that study)")
    a.add_argument("--shard", default=None, help="shard id of the study (with --study-config)")
    a.add_argument("--qualification", type=Path, default=None,
                   help="frozen qualification JSON: run only its eligible user tasks")
    a.set_defaults(func=cmd_agentdojo)

    q = s.add_parser("agentdojo-qualify", help="clean qualification of a suite (§6.4)")
    q.add_argument("--suite", help="workspace | slack | banking | travel")
    q.add_argument("--seeds", default="1,2,3", help="comma-separated qualification seeds")
    q.add_argument("--out", type=Path, required=True, help="qualification JSON to write")
    q.add_argument("--user-tasks", default=None, help="comma-separated user task ids")
    q.add_argument("--max-user-tasks", type=T.non_negative_int, default=0,
                   help="first N user tasks (0 = all)")
    q.add_argument("--study-config", type=Path, default=None,
                   help="resolved study config whose adapter settings to use")
    q.add_argument("--force", action="store_true",
                   help="redo this output of a frozen study (old bytes kept under .replaced-N/)")
    q.set_defaults(func=cmd_qualify)

    m = s.add_parser("metrics", help="adapter traces -> rollout_metrics.parquet")
    m.add_argument("traces", type=Path, help="the adapter traces folder")
    m.add_argument("--out", type=Path, required=True, help="rollout_metrics.parquet to write")
    m.add_argument("--workers", type=T.workers, default=None,
                   help="processes (default: the machine's cores)")
    m.add_argument("--force", action="store_true",
                   help="redo this output of a frozen study (old bytes kept under .replaced-N/)")
    m.set_defaults(func=cmd_metrics)

    sc = s.add_parser("agentdojo-screen",
                      help="the broader no-defense screen of a study's whole task pool")
    sc.add_argument("--study-config", type=Path, required=True,
                    help="resolved study config whose adapter settings to use")
    sc.add_argument("--suite", required=True, help="workspace | slack | banking | travel")
    sc.add_argument("--out", type=Path, required=True, help="the screen folder to write")
    sc.add_argument("--force", action="store_true",
                    help="redo this output of a frozen study (old bytes kept under .replaced-N/)")
    sc.set_defaults(func=cmd_screen)

    t = s.add_parser("table20", help="Table 20: qualification and positive-control rows")
    t.add_argument("run", type=Path, help="the run directory")
    t.add_argument("--force", action="store_true",
                   help="redo this output of a frozen study (old bytes kept under .replaced-N/)")
    t.set_defaults(func=cmd_table20)

    r = s.add_parser("parity", help="native/adapter parity and linkage counts per suite")
    r.add_argument("traces", type=Path, help="the adapter traces folder")
    r.add_argument("--out", type=Path, default=None, help="parity.json to write (default: print)")
    r.add_argument("--force", action="store_true",
                   help="redo this output of a frozen study (old bytes kept under .replaced-N/)")
    r.set_defaults(func=cmd_parity)


def _settings(args: argparse.Namespace, data: dict[str, Any] | None, suite: str,
              defense: str, seed: int) -> Any:
    from containmentbench.adapters.agentdojo.run import RunSettings
    from containmentbench.adapters.agentdojo.tasks import require_agentdojo
    from containmentbench.defense.loading import load_defense

    require_agentdojo()
    if data is not None:
        from containmentbench.adapters.study import adapter_config
        from containmentbench.pipeline.plan import model_label

        a = adapter_config(data)
        pol = load_defense(defense, data["defenses"])
        gt = a["pipeline"] == "ground_truth"
        if gt:
            return RunSettings(data["study"]["name"], suite, pol, seed, "ground_truth",
                               model_label(data), {"name": "ground_truth"}, a["attack"])
        from containmentbench.runtime.job import backend_config

        return RunSettings(data["study"]["name"], suite, pol, seed, "backend", model_label(data),
                           data["backend"], a["attack"], decoding=dict(data["decoding"]),
                           backend_config=backend_config(data))
    pol = load_defense(defense)
    if args.pipeline == "ground_truth":
        return RunSettings(args.study, suite, pol, seed, attack=args.attack,
                           native=not getattr(args, "no_native", False))
    if args.pipeline not in ("openai", "vllm"):
        raise BenchError(f"the AgentDojo adapter runs 'ground_truth' or a served model "
                         f"('openai': an OpenAI-compatible server, 'vllm': the engine in this "
                         f"process), not '{args.pipeline}'", field="pipeline")
    if not args.model:
        raise BenchError("a served pipeline needs --model (the served model name, or a model "
                         "folder / pypi: package for vllm)", field="model")
    from containmentbench.models.base import BackendConfig

    options = {"base_url": args.base_url} if args.pipeline == "openai" else \
        {"tool_parser": "hermes", "max_model_len": 8192, "enforce_eager": True}
    decoding = {"temperature": args.temperature, "top_p": args.top_p,
                "max_tokens": args.max_tokens, "seed_policy": "replicates"}
    config = BackendConfig(name=args.pipeline, model=args.model, max_tokens=args.max_tokens,
                           temperature=args.temperature, top_p=args.top_p, options=options,
                           tool_mode="native")
    return RunSettings(args.study, suite, pol, seed, "backend", args.model,
                       {"name": args.pipeline, "options": options}, args.attack,
                       native=not args.no_native, decoding=decoding, backend_config=config)


def _study(path: Path) -> dict[str, Any]:
    from containmentbench.config.compose import read_resolved

    return read_resolved(path)


def cmd_agentdojo(args: argparse.Namespace) -> int:
    from containmentbench.adapters.agentdojo import run as R
    from containmentbench.adapters.agentdojo.qualify import eligible_from
    from containmentbench.adapters.study import injection_tasks, user_tasks
    from containmentbench.trace.io import CHECKSUMS, write_shard

    if (args.out / CHECKSUMS).exists():
        raise BenchError("a finished shard is already there (never overwritten)",
                         file=str(args.out))
    data = None
    if args.study_config is not None:
        if not args.shard:
            raise BenchError("--study-config needs --shard", field="shard")
        from containmentbench.pipeline.plan import shard_by_id

        data = _study(args.study_config)
        sh = shard_by_id(data, args.shard)
        suite, defense, seed, stages = sh.stage, sh.defense, sh.seed, data["study"]["stages"]
        a = data["study"]["adapter"]
        users, injections = user_tasks(a, suite), injection_tasks(a, suite)
        min_el = int(a.get("min_eligible", 1))
    else:
        for name in ("suite", "defense", "seed"):
            if getattr(args, name) is None:
                raise BenchError(f"--{name} is required (or --study-config and --shard)",
                                 field=name)
        suite, defense, seed = args.suite, args.defense, args.seed
        stages = _ids(args.stages) or []
        from containmentbench.adapters.agentdojo.tasks import sort_ids
        from containmentbench.adapters.agentdojo.tasks import suite as get_suite

        users = _ids(args.user_tasks) or sort_ids(get_suite(suite).user_tasks)
        if args.max_user_tasks:
            users = users[:args.max_user_tasks]
        injections = _ids(args.injection_tasks)
        min_el = 1
    for st in stages:
        if st not in ("clean", "security"):
            raise BenchError(f"unknown stage '{st}' (clean, security)", field="stages")
    if args.qualification is not None:
        from containmentbench.integrity.inputs import load_json

        users = eligible_from(load_json(args.qualification, "qualification"), suite, min_el)
    cfg = _settings(args, data, suite, defense, seed)
    specs = R.specs_for(suite, users, injections, cfg.attack, stages)
    from containmentbench.adapters.agentdojo.pipelines import close_served

    try:
        outs = R.run_specs(cfg, specs)
        tables = R.shard_tables(cfg, outs)
    finally:
        close_served()
    write_shard(args.out, tables)
    errors = sum(o.status == "error" for o in outs)
    print(f"wrote {args.out}: {len(outs)} AgentDojo rollouts ({suite}, {defense}, seed {seed}, "
          f"{cfg.pipeline}); {errors} errors", file=sys.stderr)
    return 0


def cmd_qualify(args: argparse.Namespace) -> int:
    from containmentbench.adapters.agentdojo.qualify import qualify
    from containmentbench.adapters.study import user_tasks
    from containmentbench.canonical import canonical_json

    if args.study_config is not None:
        data = _study(args.study_config)
        a = data["study"]["adapter"]
        if not args.suite:
            raise BenchError("--suite is required", field="suite")
        users, seeds = user_tasks(a, args.suite), data["study"]["seeds"]
        initial, freeze = int(a.get("initial_pool") or 0), int(a.get("freeze") or 0)
    else:
        initial = freeze = 0
        data = None
        seeds = _seeds(args.seeds)  # before AgentDojo is imported
        from containmentbench.adapters.agentdojo.tasks import sort_ids
        from containmentbench.adapters.agentdojo.tasks import suite as get_suite

        users = _ids(args.user_tasks) or sort_ids(get_suite(args.suite).user_tasks)
        if args.max_user_tasks:
            users = users[:args.max_user_tasks]
    args.pipeline, args.model, args.no_native = "ground_truth", None, False
    args.study, args.attack = "qualification", "direct"
    cfg = _settings(args, data, args.suite, "none", int(seeds[0]))
    from containmentbench.adapters.agentdojo.pipelines import close_served
    from containmentbench.integrity import writer

    writer.check_file(args.out, "agentdojo-qualification", args.force)  # before any work
    try:
        rec = qualify(cfg, users, seeds, initial, freeze)
    finally:
        close_served()
    writer.write_text(args.out, canonical_json(rec) + "\n", kind="agentdojo-qualification",
                      force=args.force)
    rate = "n/a" if rec["no_call_rate"] is None else f"{rec['no_call_rate']:.3f}"
    print(f"{args.suite}: {len(rec['eligible'])}/{len(users)} tasks eligible, "
          f"{len(rec['frozen'])} frozen; parity "
          f"{rec['parity_rows']}/{rec['rows']}, linkage {rec['linkage_rows']}/{rec['rows']}; "
          f"rejected as passing with no action: "
          f"{', '.join(rec['passes_without_action']) or 'none'}; rows with no native tool "
          f"call: {rec['no_call_rows']} ({rate})", file=sys.stderr)
    return 0


def cmd_screen(args: argparse.Namespace) -> int:
    """The broader no-defense screen (paper 000 Appendix C, Table 20's last row): every
    injectable task of the pool with every selected injection task, defense ``none``, the
    study's ``screen_seeds``; one shard per seed under ``--out`` (never in ``traces/``, so
    it is never pooled with the attacked matrix), then ``screen.json``."""
    from containmentbench.adapters.agentdojo import run as R
    from containmentbench.adapters.agentdojo.pipelines import close_served
    from containmentbench.adapters.study import adapter_config, injection_tasks, user_tasks
    from containmentbench.canonical import canonical_json
    from containmentbench.integrity import writer
    from containmentbench.trace.io import write_shard

    data = _study(args.study_config)
    a = adapter_config(data)
    seeds = [int(x) for x in a.get("screen_seeds") or []]
    if not seeds:
        raise BenchError("the study has no screen (study.adapter.screen_seeds is empty)",
                         field="study.adapter.screen_seeds")
    if args.suite not in a["suites"]:
        raise BenchError(f"suite '{args.suite}' is not a suite of this study", field="suite")
    writer.check_out(args.out, "agentdojo-screen", args.force, accept=("folder",))
    users, injections = user_tasks(a, args.suite), injection_tasks(a, args.suite)
    rows = 0
    try:
        for seed in seeds:
            cfg = _settings(args, data, args.suite, "none", seed)
            specs = R.specs_for(args.suite, users, injections, cfg.attack, ("security",))
            outs = R.run_specs(cfg, specs)
            write_shard(args.out / f"seed={seed}", R.shard_tables(cfg, outs), force=args.force)
            rows += len(outs)
    finally:
        close_served()
    writer.write_text(args.out / "screen.json", canonical_json({
        "suite": args.suite, "defense": "none", "seeds": seeds, "user_tasks": users,
        "injection_tasks": injections, "rows": rows}) + "\n", kind="agentdojo-screen",
        force=args.force)
    print(f"{args.suite}: no-defense screen, {rows} rollouts over {len(seeds)} seeds",
          file=sys.stderr)
    return 0


def cmd_table20(args: argparse.Namespace) -> int:
    from containmentbench.adapters.agentdojo.report import TABLE20, table20
    from containmentbench.analysis.tables import origin_of
    from containmentbench.analysis.writers import write
    from containmentbench.integrity import writer

    for ext in ("parquet", "csv", "md", "tex"):  # before any work
        writer.check_file(args.run / "tables" / f"{TABLE20}.{ext}", "tables", args.force)
    t = table20(args.run)
    with writer.forcing(args.force):
        write(t, args.run / "tables",
              origin=origin_of(args.run / "metrics" / "rollout_metrics.parquet"))
    print(f"{t.name}: {t.frame.height} rows", file=sys.stderr)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    from containmentbench.adapters.agentdojo.metrics import compute_metrics
    from containmentbench.integrity import writer
    from containmentbench.metrics.compute import write_metrics

    writer.check_file(args.out, "metrics", args.force)  # before any work
    table = compute_metrics(args.traces, args.workers)
    write_metrics(table, args.out, args.force)
    print(f"wrote {args.out}: {table.num_rows} AgentDojo rollouts", file=sys.stderr)
    return 0


def cmd_parity(args: argparse.Namespace) -> int:
    from containmentbench.adapters.agentdojo.report import parity_summary
    from containmentbench.canonical import canonical_json
    from containmentbench.integrity import writer

    if args.out is not None:
        writer.check_file(args.out, "agentdojo-parity", args.force)  # before any work
    summary = parity_summary(args.traces)
    text = canonical_json(summary) + "\n"
    if args.out is not None:
        writer.write_text(args.out, text, kind="agentdojo-parity", force=args.force)
    for suite, c in summary["suites"].items():
        print(f"{suite}: parity {c['parity']}/{c['parity_applicable']} (user tasks "
              f"{c['clean_parity']}/{c['clean_rows']}, pairs with non-empty injection ground "
              f"truth {c['pair_parity']}/{c['pair_rows']}); linkage "
              f"{c['linkage_complete']}/{c['rows']}; projection {c['projection_parity']}/"
              f"{c['projection_rows']}; errors {c['errors']}", file=sys.stderr)
    return 0 if summary["ok"] else 1
