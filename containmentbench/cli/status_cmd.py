"""``containmentbench status study=NAME [key=value ...]``: every step of each model's chain
(rollouts, reparse, metrics, analysis, tables, cases, audit, report, freeze) with done,
outdated or pending, the shards done, stale, errored, failed (stopped on an error),
interrupted (stopped without one: Ctrl-C, kill, time limit), missing and corrupt, and the
shards on disk that the study no longer lists, and the throughput of each rollout job and of
the study (rollouts per hour, model calls and tokens per second, prefix-cache hit rate:
wall clock, ``pipeline/throughput.py``)."""

from __future__ import annotations

import argparse
import json

from containmentbench.cli import study_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="every step of a study's chain per model (done, "
                                      "outdated, pending) and its shards: done, stale, "
                                      "errored, failed, interrupted, missing, corrupt")
    study_args.add(p)
    p.add_argument("--json", action="store_true",
                   help="print the shard states (and the steps) as JSON")
    p.add_argument("--list", action="store_true", help="print every non-done shard id")
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    from containmentbench.pipeline.chain import chain
    from containmentbench.pipeline.plan import model_slug, run_dir
    from containmentbench.pipeline.status import (
        DROPPED,
        STATES,
        stale_reasons,
        study_status,
        study_throughput,
    )
    from containmentbench.pipeline.throughput import line

    runs = study_args.runs(args.target, "status")
    adaptive = [bool((d["study"].get("adaptive") or {}).get("enabled")) for d in runs]
    per_run = {model_slug(d): ({k: [] for k in (*STATES, DROPPED)} if a else study_status(d))
               for d, a in zip(runs, adaptive, strict=True)}
    steps = {model_slug(d): chain(d, per_run[model_slug(d)]) for d in runs}
    speed = {model_slug(d): study_throughput(d) for d, a in zip(runs, adaptive, strict=True)
             if not a}
    if args.json:
        # one model: its states (as before) and its steps; several: {model slug: ...}
        full = {m: {**st, "steps": [{"step": s, "state": x, "detail": t}
                                    for s, x, t in steps[m]],
                    **({"throughput": speed[m]} if m in speed else {})}
                for m, st in per_run.items()}
        out = next(iter(full.values())) if len(runs) == 1 else full
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    for data, adapt in zip(runs, adaptive, strict=True):
        slug = model_slug(data)
        st = per_run[slug]
        print(f"{run_dir(data)}:")
        for step, state, detail in steps[slug]:
            print(f"  {step:<18} {state:<8} {detail}")
        if adapt:
            continue
        total = sum(len(st[k]) for k in STATES)
        print(f"  shards: {total}: " + ", ".join(f"{k} {len(st[k])}" for k in STATES))
        if st["stale"]:
            for why, ids in stale_reasons(data, st["stale"]).items():
                print(f"  {len(ids)} stale shard(s): {why} changed since they were written "
                      f"(the next run redoes them)")
        if st[DROPPED]:
            print(f"  {len(st[DROPPED])} shard(s) on disk are no longer part of the study "
                  f"(not in its metrics; the next run moves them to retired/)")
        tp = speed[slug]
        if tp["study"] is None:
            print("  throughput: none recorded (no rollout job of this plan has run)")
        else:
            for name, rec in tp["jobs"].items():
                print(f"  throughput job {name}: {line(rec)}")
            print(f"  throughput study ({len(tp['jobs'])} job(s), pooled): {line(tp['study'])}")
        if args.list:
            for k in ("corrupt", "stale", "errored", "failed", "interrupted", "missing",
                      DROPPED):
                for sid in st[k]:
                    print(f"  {k:11} {sid}")
    return 0
