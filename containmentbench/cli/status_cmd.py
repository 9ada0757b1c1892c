"""``containmentbench status STUDY [OVERRIDES...]``: shards done, failed, missing, corrupt."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="list a study's shards: done, failed, missing, corrupt")
    p.add_argument("study", help="study name (config/study/<name>.yaml)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. backend=vllm")
    p.add_argument("--json", action="store_true")
    p.add_argument("--list", action="store_true", help="print every non-done shard id")
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    from containmentbench.config.compose import load_study
    from containmentbench.pipeline.plan import study_dir
    from containmentbench.pipeline.status import study_status

    data = load_study([f"study={args.study}", *args.overrides])
    st = study_status(data)
    if args.json:
        print(json.dumps(st, indent=2, sort_keys=True))
        return 0
    total = sum(len(v) for v in st.values())
    print(f"{study_dir(data)}: {total} shards: " + ", ".join(
        f"{k} {len(v)}" for k, v in st.items()))
    if args.list:
        for k in ("corrupt", "failed", "missing"):
            for sid in st[k]:
                print(f"{k:8} {sid}")
    return 0
