"""``containmentbench status STUDY [OVERRIDES...]``: shards done, failed, missing, corrupt,
and the shards on disk that the study no longer lists."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="list a study's shards per model: done, stale, errored, "
                                      "failed, missing, corrupt")
    p.add_argument("study", help="study name (config/study/<name>.yaml)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backend=vllm")
    p.add_argument("--json", action="store_true")
    p.add_argument("--list", action="store_true", help="print every non-done shard id")
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    from containmentbench.pipeline.plan import model_slug, run_dir
    from containmentbench.pipeline.runs import load_runs
    from containmentbench.pipeline.status import DROPPED, STATES, study_status

    runs = load_runs([f"study={args.study}", *args.overrides])
    per_run = {model_slug(d): study_status(d) for d in runs}
    if args.json:
        # one model: its states (as before); several: {model slug: states}
        out = next(iter(per_run.values())) if len(runs) == 1 else per_run
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    for data in runs:
        st = per_run[model_slug(data)]
        total = sum(len(st[k]) for k in STATES)
        print(f"{run_dir(data)}: {total} shards: " + ", ".join(
            f"{k} {len(st[k])}" for k in STATES))
        if st[DROPPED]:
            print(f"{run_dir(data)}: {len(st[DROPPED])} shard(s) on disk are no longer part of "
                  f"the study (not in its metrics; the next run moves them to retired/)")
        if args.list:
            for k in ("corrupt", "stale", "errored", "failed", "missing", DROPPED):
                for sid in st[k]:
                    print(f"{k:8} {sid}")
    return 0
