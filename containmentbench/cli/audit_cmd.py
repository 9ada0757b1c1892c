"""``containmentbench audit ...``: the offline provenance audit (paper 001).

    audit run RUN_DIR [--policy FILE] [--no-replay]   audit every trace, write RUN_DIR/audit/
        [--judge NAME|FILE]                            with the §4.3 counterfactual judge
                                                       (default: the run's study.audit.judge)
    audit policy FILE                                  validate an audit policy
    audit suite build [--out DIR] [--check]            the labelled TaintBench-style suite
    audit suite run --out DIR [--runs 5] [KEY=VALUE]   roll out the suite into a run folder,
                                                       audit and score both detectors

The labelled suite as a study, through the pipeline: ``snakemake --config study=taintbench``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from containmentbench.cli import argtypes as T
from containmentbench.errors import BenchError

SIM_LABEL = " [simulated agent: harness validation, not a model result]"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="offline provenance audit of traces (NeuroTaint, paper "
                                     "001): DCPG, four evidence tiers, counterfactual replay")
    asub = p.add_subparsers(dest="audit_verb", metavar="SUBVERB")
    asub.required = True
    r = asub.add_parser("run", help="audit every rollout of a run directory")
    r.add_argument("run_dir", type=Path, help="the run directory to audit (holds traces/)")
    r.add_argument("--policy", type=Path, default=None, help="audit policy YAML (default: "
                   "the packaged policy with the paper's thresholds)")
    r.add_argument("--no-replay", action="store_true",
                   help="skip the counterfactual replays (implicit analysis not run)")
    r.add_argument("--canary", action="store_true",
                   help="Tier 1 live: replay every replayable rollout once more with the "
                        "canary appended to each untrusted source (paper 001 §4.2)")
    r.add_argument("--replay", choices=("auto", "real", "off"), default="auto",
                   help="counterfactual replays: auto (backends that reproduce a trace "
                        "without a model: sim, scripted), real (also a real backend with "
                        "per-request seeds; loads the model; a replay that does not "
                        "reproduce the trace gives 'not probed'), off (= --no-replay)")
    r.add_argument("--out", type=Path, default=None, help="output folder (RUN_DIR/audit)")
    r.add_argument("--force", action="store_true",
                   help="redo the audit of a frozen study (old bytes kept under .replaced-N/)")
    r.add_argument("--batch-size", type=T.positive_int, default=64,
                   help="embedding batch size")
    _judge_options(r)
    r.set_defaults(func=cmd_run)
    c = asub.add_parser("policy", help="validate an audit policy YAML and print its hash")
    c.add_argument("file", type=Path, help="an audit policy YAML to check and print")
    c.set_defaults(func=cmd_policy)
    s = asub.add_parser("suite", help="the labelled TaintBench-style suite")
    ssub = s.add_subparsers(dest="suite_verb", metavar="SUBVERB")
    ssub.required = True
    b = ssub.add_parser("build", help="generate the suite (labels fixed in the files)")
    b.add_argument("--out", type=Path, default=Path("scenarios/taintbench"),
                   help="suite folder (default: scenarios/taintbench)")
    b.add_argument("--force", action="store_true",
                   help="replace a different earlier build of this suite (moved aside)")
    b.add_argument("--check", action="store_true",
                   help="compare with the files at --out instead of writing")
    b.set_defaults(func=cmd_suite_build)
    u = ssub.add_parser("run", help="roll out the suite into a run folder (study=taintbench "
                                    "with overrides), audit it, score both detectors")
    u.add_argument("--out", type=Path, required=True, help="a new run folder")
    u.add_argument("--runs", type=T.positive_int, default=5,
                   help="runs per scenario (seeds 1..N)")
    u.add_argument("--policy", type=Path, default=None,
                   help="audit policy YAML (default: the packaged one)")
    u.add_argument("--every", type=T.positive_int, default=1,
                   help="every n-th scenario only (quick checks)")
    _judge_options(u)
    u.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="study config overrides, e.g. model=sim backend=sim "
                        "'study.models=[sim_never_follow]'")
    u.set_defaults(func=cmd_suite_run)


def _judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", default=None, metavar="NAME|FILE",
                   help="the counterfactual judge (paper 001 §4.3) for sinks no replay "
                        "probes: a judge YAML (backend, model, max_tokens, options; greedy "
                        "decoding) or a packaged name, e.g. qwen2_5_coder_0_5b_cpu (vLLM's "
                        "CPU engine); probed before any work. Default: the study's "
                        "study.audit.judge, as the run's config.yaml records it")
    p.add_argument("--judge-backend", default=None,
                   help="the judge given inline instead of --judge: a backend name, e.g. "
                        "openai")
    p.add_argument("--judge-model", default=None, help="the judge's model id")
    p.add_argument("--judge-option", action="append", default=[], metavar="KEY=VALUE",
                   help="judge backend option (e.g. base_url=http://localhost:8000/v1)")


def cmd_policy(args: argparse.Namespace) -> int:
    from containmentbench.audit.policy import load_audit_policy

    pol = load_audit_policy(args.file)
    print(json.dumps({"file": str(args.file), "hash": pol.hash, **pol.to_dict()},
                     sort_keys=True))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from containmentbench.audit.policy import load_audit_policy
    from containmentbench.audit.study import audit_study, check_audit_out
    from containmentbench.integrity import writer

    pol = load_audit_policy(args.policy)  # bad policy: one line, exit 2, before any work
    if not args.run_dir.is_dir():
        raise BenchError("run directory not found", file=str(args.run_dir), field="run_dir")
    check_audit_out(args.run_dir, args.out, args.force)
    from containmentbench.audit.embed import Embedder

    judge = judge_from_args(args) or judge_of_run(args.run_dir)
    with writer.forcing(args.force):
        info = audit_study(args.run_dir, pol, Embedder(batch_size=args.batch_size),
                           replay=not args.no_replay and args.replay != "off", out=args.out,
                           judge=judge, replay_real=args.replay == "real", canary=args.canary)
    if info["simulated_agent"]:
        print(SIM_LABEL.strip(), file=sys.stderr)
    return 0


def judge_from_args(args: argparse.Namespace) -> object | None:
    """The judge of ``--judge`` or ``--judge-backend``/``--judge-model`` (options of
    ``--judge-option`` added to either), or None."""
    from dataclasses import replace

    from containmentbench.audit.judge import Judge, JudgeConfig, load_judge_config
    from containmentbench.cli.rollout_cmd import parse_options

    if args.judge and args.judge_backend:
        raise BenchError("give --judge or --judge-backend, not both", field="judge")
    if args.judge:
        cfg = load_judge_config(args.judge)
    elif args.judge_backend:
        if not args.judge_model:
            raise BenchError("--judge-backend needs --judge-model", field="judge-model")
        cfg = JudgeConfig(args.judge_backend, args.judge_model)
    else:
        if args.judge_model or args.judge_option:
            raise BenchError("--judge-model/--judge-option need --judge or --judge-backend",
                             field="judge")
        return None
    cfg = replace(cfg, options={**cfg.options, **parse_options(args.judge_option)})
    return Judge.from_config(cfg)


def judge_of_run(run_dir: Path) -> object | None:
    """The judge the run's study names (``study.audit.judge`` in its ``config.yaml``, as
    composition resolved it), or None: what the pipeline's audit rule audits with."""
    from containmentbench.audit.judge import Judge
    from containmentbench.config.compose import read_resolved, study_judge

    path = run_dir / "config.yaml"
    if not path.is_file():
        return None
    try:
        cfg = study_judge(read_resolved(path))
    except BenchError as exc:
        raise BenchError(exc.detail, file=str(path), field=exc.field) from None
    return Judge.from_config(cfg) if cfg is not None else None


def cmd_suite_build(args: argparse.Namespace) -> int:
    from containmentbench.audit.suite import SUITE, build
    from containmentbench.scenarios.manifest import check_suite_out, write_suite_files

    if not args.check:
        check_suite_out(args.out, SUITE, args.force)  # before any work
        files = build()  # every label's derivation and realisation checked first
    else:
        files = build(controls=False)  # the committed bytes held their checks when built
        bad = [n for n, data in files.items()
               if not (args.out / n).is_file() or (args.out / n).read_bytes() != data]
        if bad:
            raise BenchError("differs from the generator output (labels must not change "
                             "after detectors ran)", file=str(args.out / bad[0]))
        print(f"{args.out}: matches the generator", file=sys.stderr)
        return 0
    what = write_suite_files(args.out, SUITE, files, args.force)
    print(f"{args.out}: {what}: {len(files) - 2} stage files, the manifest and the labels "
          "(every label's derivation and realisation held)", file=sys.stderr)
    return 0


def cmd_suite_run(args: argparse.Namespace) -> int:
    from containmentbench.audit.policy import load_audit_policy
    from containmentbench.audit.suite_run import roll_out

    pol = load_audit_policy(args.policy)
    from containmentbench.audit.embed import Embedder
    from containmentbench.audit.study import audit_study, check_audit_out

    judge = judge_from_args(args)  # a bad judge config: one line before the roll-out
    run = roll_out(args.out, args.overrides, args.runs, args.every)
    check_audit_out(run, None)
    # no judge flag: the study's (an override study.audit.judge=..., checked at composition)
    judge = judge or judge_of_run(run)
    info = audit_study(run, pol, Embedder(), replay_real=True, judge=judge)
    print(f"wrote {args.out}" + (SIM_LABEL if info["simulated_agent"] else ""),
          file=sys.stderr)
    return 0
