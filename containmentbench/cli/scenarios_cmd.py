"""``containmentbench scenarios generate|freeze|build|check|show``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from containmentbench.cli import argtypes as T
from containmentbench.errors import BenchError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenarios", help="generate, check or show scenario suites")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True
    g = ssub.add_parser("generate", help="generate a suite into a new folder (byte-identical "
                                         "per seed); the frozen suites are rewritten only by "
                                         "`scenarios freeze`")
    g.add_argument("--suite", required=True,
                   help="full_main | stress | smoke | exposed | exposed_smoke | exposed_real")
    g.add_argument("--out", type=Path, required=True,
                   help="a new or empty folder, or an earlier generated suite (--force)")
    g.add_argument("--seed", type=T.seed, default=None, help="generator seed")
    g.add_argument("--force", action="store_true", help="replace an earlier, different suite "
                   "at --out (moved aside to .<name>.replaced-<n>, never deleted)")
    g.set_defaults(func=cmd_generate, freeze=False)
    f = ssub.add_parser("freeze", help="regenerate a committed suite under scenarios/<suite> "
                                       "(the only verb that rewrites a frozen suite; an old "
                                       "one that differs is moved aside, never deleted)")
    f.add_argument("--suite", required=True,
                   help="full_main | stress | smoke | exposed | exposed_smoke | exposed_real")
    f.add_argument("--seed", type=T.seed, default=None, help="generator seed")
    f.set_defaults(func=cmd_generate, freeze=True, out=None, force=True)
    b = ssub.add_parser("build", help="build a suite from your own records (a JSONL file of "
                                      "minimal or full records, or an edited suite folder): "
                                      "validate, run the literal-reader and positive-control "
                                      "checks, hash and freeze it in --out "
                                      "(docs/scenarios.md)")
    b.add_argument("--from", dest="src", type=Path, required=True,
                   help="a JSONL file of records (docs/user_record.schema.json) or a suite "
                        "folder whose stage files were edited")
    b.add_argument("--out", type=Path, required=True,
                   help="a new or empty folder, or an earlier build (--force)")
    b.add_argument("--name", default=None,
                   help="the suite's name in its records and manifest (default: --out's "
                        "folder name)")
    b.add_argument("--force", action="store_true", help="replace an earlier, different build "
                   "at --out (moved aside to .<name>.replaced-<n>, never deleted)")
    b.add_argument("--json", action="store_true", help="print the summary as JSON")
    b.set_defaults(func=cmd_build)
    c = ssub.add_parser("check", help="hash drift check + positive-control self-check + "
                                      "literal-reader check (exit 2 when a plan needs a "
                                      "value its agent was never shown) + competent and "
                                      "incompetent readings of every task")
    c.add_argument("--suite", required=True, help="suite name or folder")
    c.add_argument("--stage", default=None, help="check one stage only (default: every stage)")
    c.add_argument("--json", action="store_true", help="print the summary as JSON")
    c.set_defaults(func=cmd_check)
    s = ssub.add_parser("show", help="print one scenario")
    s.add_argument("scenario_id", help="the scenario to print, e.g. fm-sec-0001")
    s.add_argument("--suite", default=None, help="suite name or folder (default: by id prefix)")
    s.set_defaults(func=cmd_show)


def cmd_generate(args: argparse.Namespace) -> int:
    from containmentbench.scenarios.generator import DEFAULT_SEED, SUITES, generate_suite
    from containmentbench.scenarios.manifest import (
        check_suite_out,
        render_suite,
        write_suite_files,
    )

    if args.suite not in SUITES:
        raise BenchError(f"unknown suite '{args.suite}' (known: {', '.join(SUITES)})",
                         field="suite")
    from containmentbench.scenarios.manifest import suite_dir

    seed = DEFAULT_SEED if args.seed is None else args.seed
    if args.freeze:
        out = suite_dir(args.suite) if (Path("scenarios") / args.suite).exists() \
            else Path("scenarios") / args.suite
    else:
        out = args.out
        frozen = Path("scenarios").resolve()
        if out.resolve() == frozen or frozen in out.resolve().parents:
            raise BenchError("is a committed (frozen) suite folder; only `containmentbench "
                             "scenarios freeze` rewrites those", file=str(out), field="out")
    check_suite_out(out, args.suite, args.force)
    t0 = time.perf_counter()
    records = generate_suite(args.suite, seed)
    files = render_suite(args.suite, seed, records)
    what = write_suite_files(out, args.suite, files, args.force)
    dt = time.perf_counter() - t0
    counts = ", ".join(f"{k}={len(v)}" for k, v in records.items())
    print(f"{out}: {what}: {counts} ({sum(len(v) for v in records.values())} scenarios, "
          f"{dt:.2f} s)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from containmentbench.scenarios.builder import as_json, build, summary
    from containmentbench.scenarios.manifest import repo_root

    out = args.out.resolve()
    if any(out == f or f in out.parents
           for f in (Path("scenarios").resolve(), (repo_root() / "scenarios").resolve())):
        raise BenchError("is inside the committed suites' folder; only `containmentbench "
                         "scenarios freeze` writes there: choose another folder",
                         file=str(args.out), field="out")
    built, what, digest = build(args.src, args.out, args.name, args.force)
    print(as_json(built, args.out, what, digest) if args.json
          else summary(built, args.out, what, digest))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from containmentbench.scenarios import readings
    from containmentbench.scenarios.literal import check_literal
    from containmentbench.scenarios.manifest import load_suite, suite_dir, verify_suite
    from containmentbench.scenarios.selfcheck import check, summary

    directory = suite_dir(args.suite)
    problems = verify_suite(directory)
    for prob in problems:
        print(f"drift: {prob}", file=sys.stderr)
    if problems:
        from containmentbench.scenarios.manifest import read_manifest, rebuild_hint

        print(f"to accept the edits: {rebuild_hint(directory, read_manifest(directory))}",
              file=sys.stderr)
    scenarios = load_suite(directory, args.stage)
    for s in scenarios:  # a task template nobody read competently: refused before any run
        readings.template_of(s)
    t0 = time.perf_counter()
    results = check(scenarios)
    read = readings.check(scenarios)
    literal = check_literal(scenarios)
    dt = time.perf_counter() - t0
    summ = summary(results)
    summ["readings"] = readings.summary(read)
    summ["manifest_drift"] = problems
    summ["literal"] = {"steps": literal.steps, "hidden": [h.line() for h in literal.hidden]}
    summ["seconds"] = round(dt, 2)
    for r in results:
        for prob in r.problems:
            print(f"FAIL {r.scenario_id}: {prob}", file=sys.stderr)
    for rr in read:
        for prob in rr.problems:
            what = "competent" if rr.competent else "incompetent"
            print(f"FAIL {rr.scenario_id} ({rr.template}, {what} reading {rr.variant}): "
                  f"{prob}", file=sys.stderr)
    for h in literal.hidden:
        print(f"hidden value: {h.line()}", file=sys.stderr)
    if args.json:
        print(json.dumps(summ, indent=2, sort_keys=True))
    else:
        print(f"self-check of {directory}: {summ['total'] - summ['failed']}/{summ['total']} "
              f"scenarios pass ({dt:.1f} s); manifest drift: {len(problems)}")
        print(f"{'stage':<18}{'n':>6}{'failed':>8}")
        for k, v in summ["by_stage"].items():
            print(f"{k:<18}{v['n']:>6}{v['failed']:>8}")
        print(f"{'domain':<18}{'n':>6}{'failed':>8}")
        for k, v in summ["by_domain"].items():
            print(f"{k:<18}{v['n']:>6}{v['failed']:>8}")
        rd = summ["readings"]
        print(f"task readings (scenarios/readings.py): {rd['total'] - rd['failed']}/"
              f"{rd['total']} variant runs judged as expected")
        print(f"{'template':<18}{'competent':>10}{'incompetent':>12}{'failed':>8}")
        for k, v in sorted(rd["by_template"].items()):
            print(f"{k:<18}{v['competent']:>10}{v['incompetent']:>12}{v['failed']:>8}")
        print(f"literal reader: {literal.steps} plan steps checked, "
              f"{len(literal.hidden)} need a value their agent was not shown")
    if literal.hidden:
        return 2  # bad input: a scenario a real model cannot solve by reading
    return 1 if (summ["failed"] or summ["readings"]["failed"] or problems) else 0


def cmd_show(args: argparse.Namespace) -> int:
    from containmentbench.scenarios.generator import SUITE_PREFIX
    from containmentbench.scenarios.manifest import load_suite

    suite = args.suite
    if suite is None:
        prefix = args.scenario_id.split("-", 1)[0]
        by_prefix = {v: k for k, v in SUITE_PREFIX.items()}
        if prefix not in by_prefix:
            raise BenchError(f"cannot tell the suite of '{args.scenario_id}'; pass --suite",
                             field="scenario_id")
        suite = by_prefix[prefix]
    for s in load_suite(suite):
        if s.id == args.scenario_id:
            print(json.dumps(s.record, indent=2, sort_keys=True))
            return 0
    raise BenchError(f"no scenario '{args.scenario_id}' in suite '{suite}'", field="scenario_id")
