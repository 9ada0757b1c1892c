"""``containmentbench defenses list|check``: the defenses a study can name, and a defense's
check on the scripted reference plans before it is measured (runtime/defense_check.py)."""

from __future__ import annotations

import argparse

from containmentbench.cli import study_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("defenses", help="list the defenses a study can name, or check one "
                                        "(determinism, rule ids, no ground truth, no writes, "
                                        "hook time) before measuring it")
    s = p.add_subparsers(dest="what", metavar="ACTION", required=True)
    ls = s.add_parser("list", help="every defense: origin (built-in, entry point, file) and "
                                   "code identity")
    ls.add_argument("--defenses-file", default=None, metavar="YAML",
                    help="also list the defenses of this file")
    ls.set_defaults(func=cmd_list)
    c = s.add_parser("check", help="run NAME on the scripted benign and attacker plans of the "
                                   "study's suite (default study=smoke) and report determinism, "
                                   "rule ids, hook errors, ground-truth access, writes and "
                                   "hook timing; exit 1 when a check fails")
    c.add_argument("name", help="a configured defense or a stack a+b+c (a defense of your "
                                "own: add defenses_file=PATH)")
    study_args.add(c)
    c.set_defaults(func=cmd_check)


def cmd_list(args: argparse.Namespace) -> int:
    from containmentbench.cli.list_cmd import rows

    items = rows("defenses", args.defenses_file)
    width = max(len(n) for n, _ in items)
    for name, what in items:
        print(f"{name:<{width}}  {what}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from containmentbench.config.compose import compose, validate
    from containmentbench.config.loader import config_dir
    from containmentbench.errors import BenchError
    from containmentbench.runtime.defense_check import check_defense
    from containmentbench.scenarios.manifest import load_suite, suite_dir

    tokens = study_args.overrides(list(args.target), "defenses check")
    if not any(t.startswith("study=") for t in tokens):
        tokens = ["study=smoke", *tokens]
    name = args.name
    data = validate(compose([*tokens, f"study.defenses=[{name}]"]))
    if (data["study"].get("adapter") or {}).get("name"):
        raise BenchError("defenses check runs on our suites (an AgentDojo study runs the same "
                         "defense object through the adapter)", field="study")
    suite = data["study"]["suite"]
    scenarios = [s for st in data["study"]["stages"] for s in load_suite(suite, st)]
    protected = [suite_dir(suite).parent, config_dir().parent / data["results_dir"]]
    report = check_defense(name, data["defenses"], scenarios, protected)
    print("\n".join(report.lines()))
    print("ok: the defense passed every check" if report.ok else
          "FAILED: see the lines marked FAIL")
    return 0 if report.ok else 1
