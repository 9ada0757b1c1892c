"""``containmentbench search ...``: the bounded adaptive candidate search and what follows it
(paper 000 §6.3, Appendix B), one step per sub-command, as the Snakemake rules of
workflow/rules/adaptive.smk call them:

    search splits   family-disjoint development / held-out / audit clusters
    search run      one bounded tree search (--search transfer | target; append-only query
                    log; resumes after a kill)
    search freeze   frozen candidates: canonical JSON, sha256 each, manifest
    search qualify  staged qualification: known-good replay, development, family-held-out
    search defense-specific
                    after a passing qualification, one bounded search per defense
    search replay   derived suite of the protocol's frozen candidates -> rollout shards,
                    each group under its defenses (Table 18's protocol)
    search tables   Tables 18-19 and the replay funnel into the run's tables/
    search reproduce
                    metrics and Tables 18-19 recomputed from the cached replay traces,
                    compared byte for byte (rule reproduce of adaptive studies)

Every input is validated (budgets against config/bounds.py, strategies, seeds, splits)
before any query; bad input is one line naming the field, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from containmentbench.cli import argtypes as T
from containmentbench.errors import BenchError


def _study_args(p: argparse.ArgumentParser) -> None:
    from containmentbench.cli import study_args

    study_args.add(p)
    p.add_argument("--study-config", type=Path, default=None,
                   help="or a resolved study config (results/<study>/<model>/config.yaml; "
                        "the pipeline's form)")


def _data(args: argparse.Namespace) -> dict[str, Any]:
    from containmentbench.attacks.settings import settings
    from containmentbench.cli import study_args

    if args.study_config is not None:
        if args.target:
            raise BenchError("give --study-config or study=NAME key=value ..., not both",
                             field="study")
        from containmentbench.config.compose import read_resolved
        data = read_resolved(args.study_config)
    else:
        runs = study_args.runs(args.target, f"search {args.step}")
        if len(runs) > 1:
            raise BenchError("an adaptive search runs one model; say model=NAME",
                             field="study.models")
        data = runs[0]
    settings(data)  # every adaptive check, before any query
    return data


def _scenarios(data: dict[str, Any]) -> dict[str, Any]:
    from containmentbench.attacks.settings import settings
    from containmentbench.attacks.splits import attacked_pool

    return {s.id: s for s in attacked_pool(data["study"]["suite"], settings(data).stages)}


def _splits(path: Path, by_id: dict[str, Any]) -> dict[str, Any]:
    from containmentbench.attacks.splits import load_splits

    sp = load_splits(str(path))
    for name, part in sp["splits"].items():
        missing = [i for i in part["scenarios"] if i not in by_id]
        if missing:
            raise BenchError(f"scenario '{missing[0]}' of the {name} split is not an attacked "
                             f"scenario of this study's suite", file=str(path),
                             field=f"splits.{name}.scenarios")
    return sp


def cmd_splits(args: argparse.Namespace) -> int:
    from containmentbench.attacks.settings import settings
    from containmentbench.attacks.splits import make_splits
    from containmentbench.canonical import canonical_json
    from containmentbench.integrity import writer

    data = _data(args)
    A = settings(data)
    writer.check_file(args.out, "adaptive-splits", args.force)
    by_id = _scenarios(data)
    sp = make_splits(list(by_id.values()), {"development": A.development_clusters,
                                            "heldout": A.heldout_clusters,
                                            "audit": A.audit_clusters}, A.split_seed)
    what = writer.write_json(args.out, json.loads(canonical_json(sp)), kind="adaptive-splits",
                             force=args.force, once=True)
    print(f"splits: {what} "
          + ", ".join(f"{k} {len(v['clusters'])} clusters / {len(v['families'])} families"
                      for k, v in sp["splits"].items()), file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from containmentbench.attacks.runner import Runner
    from containmentbench.attacks.search import Search, write_result
    from containmentbench.integrity import writer

    data = _data(args)
    by_id = _scenarios(data)
    sp = _splits(args.splits, by_id)
    writer.check_out(args.out, "adaptive-search", args.force)
    writer.ensure_dir(args.out, "adaptive-search")
    dev = [by_id[i] for i in sp["splits"]["development"]["scenarios"]]
    from containmentbench.attacks.settings import variant

    variant(data, args.search)  # an unknown search: one line before any query
    runner = Runner(data, label=f"search-{args.search}")
    try:
        result = Search(data, dev, args.out, runner, args.search).run()
    finally:
        runner.close()
    what = write_result(args.out, result, args.force)
    print(f"search: {sum(result['queries_per_restart'].values())} target queries "
          f"({result['queries_per_restart']}), {len(result['evaluated'])} candidates, "
          f"{result['rejected_rewrites']} rewrites rejected; candidates.json {what}",
          file=sys.stderr)
    return 0


def cmd_freeze(args: argparse.Namespace) -> int:
    from containmentbench.attacks.frozen import render, write_frozen
    from containmentbench.integrity.inputs import load_json

    result = load_json(args.search / "candidates.json", "candidates")
    print(f"frozen: {write_frozen(args.out, render(result), args.force)}", file=sys.stderr)
    return 0


def _search_log(folder: Path) -> dict[str, Any]:
    from containmentbench.attacks.querylog import LOG, read_records

    recs = read_records(folder / LOG)
    starts = {r["key"]: r for r in recs if r["type"] == "query_start"}
    queries = [{**starts[r["key"]], "stage": r["stage"]} for r in recs
               if r["type"] == "query_done"]
    from containmentbench.integrity.inputs import load_json

    result = load_json(folder / "candidates.json", "candidates")
    return {"queries": sorted(queries, key=lambda q: q["key"]),
            "candidates": result["evaluated"]}


def cmd_qualify(args: argparse.Namespace) -> int:
    from containmentbench.attacks.frozen import load_frozen
    from containmentbench.attacks.qualify import qualify, write_qualification
    from containmentbench.attacks.runner import Runner
    from containmentbench.attacks.settings import settings
    from containmentbench.integrity import writer

    data = _data(args)
    writer.check_out(args.out, "adaptive-qualification", args.force)
    by_id = _scenarios(data)
    sp = _splits(args.splits, by_id)
    frozen = load_frozen(args.frozen)
    runner = Runner(data, label="qualification")
    try:
        decision, rows = qualify(settings(data), frozen, _search_log(args.search), by_id, sp,
                                 runner)
    finally:
        runner.close()
    what = write_qualification(args.out, decision, rows, args.force)
    for s in decision["stages"]:
        print(f"  {s['stage']}: N={s['N']} exact={s['exact_proposal']} "
              f"goal={s['goal_commit']} domains={','.join(s['goal_domains']) or '-'} "
              f"{'pass' if s['passed'] else s['reason'] if s['passed'] is None else 'FAIL: ' + str(s['reason'])}",
              file=sys.stderr)
    print(f"qualification: {what}; stopped at {decision['stopped_at']}" if
          decision["stopped_at"] else f"qualification: {what}; passed", file=sys.stderr)
    return 0


def cmd_defense_specific(args: argparse.Namespace) -> int:
    from containmentbench.attacks import defense_specific as DS
    from containmentbench.attacks.runner import Runner
    from containmentbench.integrity import writer

    data = _data(args)
    writer.check_out(args.out, DS.KIND, args.force)
    by_id = _scenarios(data)
    sp = _splits(args.splits, by_id)
    qual = json.loads((args.qualification / "qualification.json").read_text())
    writer.ensure_dir(args.out, DS.KIND)
    dev = [by_id[i] for i in sp["splits"]["development"]["scenarios"]]
    runner = Runner(data, label="defense-specific")
    try:
        decision = DS.run(data, qual, dev, args.out, runner, args.force)
    finally:
        runner.close()
    print(f"defense-specific optimization: "
          f"{'ran for ' + ', '.join(decision['defenses']) if decision['attempted'] else 'not attempted'}"
          f" ({decision['reason']})", file=sys.stderr)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from containmentbench.attacks import replay as R
    from containmentbench.attacks.settings import settings
    from containmentbench.canonical import canonical_json

    data = _data(args)
    A = settings(data)
    by_id = _scenarios(data)
    sp = _splits(args.splits, by_id)
    groups = R.groups(data, A, args.adaptive)
    records, index = R.build_suite(data, groups, by_id, sp)
    what = R.write_suite(data, records, A.split_seed, args.force)
    stats = R.run_replay(data, sorted(records), index, quiet=True)
    R.write_index(data, index)
    from containmentbench.integrity import writer

    writer.write_text(args.out, canonical_json({
        "protocol": A.table18_protocol, "derived_scenarios": len(index),
        "groups": [{"search": g.search.name, "mode": g.mode, "candidates": len(g.candidates),
                    "defenses": list(g.defenses)} for g in groups],
        "seeds": list(A.eval_seeds)}) + "\n", kind="adaptive-replay")
    print(f"replay: derived suite {what} ({len(index)} scenarios); {stats}", file=sys.stderr)
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    from containmentbench.analysis.tables import origin_of
    from containmentbench.analysis.writers import write
    from containmentbench.attacks.replay import build_tables
    from containmentbench.integrity import writer
    from containmentbench.integrity.inputs import load_json
    from containmentbench.metrics.schema import check_metrics_file

    check_metrics_file(args.run / "metrics" / "rollout_metrics.parquet")
    load_json(args.run / "adaptive" / "replay.json", "replay_index")
    for t in build_tables(args.run, args.qualification):
        for ext in ("parquet", "csv", "md", "tex"):  # before any is written
            writer.check_file(args.run / "tables" / f"{t.name}.{ext}", "tables", args.force)
    for name in ("findings.parquet", "headline.json", "headline.md", "results.parquet"):
        writer.check_file(args.run / "tables" / name, "tables", args.force)
    with writer.forcing(args.force):
        built = build_tables(args.run, args.qualification)
        origin = origin_of(args.run / "metrics" / "rollout_metrics.parquet")
        for t in built:
            write(t, args.run / "tables", origin=origin)
            print(f"{t.name}: {t.frame.height} rows", file=sys.stderr)
        _headline(args.run, built)
    return 0


def _headline(run: Path, built: list[Any]) -> None:
    """The adaptive study's headline: the findings per defense over the replayed frozen
    candidates (analysis/headline.py; no paired claims), and every number of Tables 18-19
    and the funnel as rows of tables/results (analysis/results.py)."""
    import polars as pl

    from containmentbench.analysis import headline as H
    from containmentbench.analysis.late import late_tables
    from containmentbench.analysis.paired import Settings
    from containmentbench.analysis.results import results_table
    from containmentbench.analysis.seeds import interval_rows
    from containmentbench.analysis.tables import Context
    from containmentbench.analysis.writers import write
    from containmentbench.config.compose import read_resolved

    df = pl.read_parquet(run / "metrics" / "rollout_metrics.parquet")
    ctx = Context(df)
    s = Settings.from_config(read_resolved(run / "config.yaml")["analysis"])
    found = H.findings(interval_rows(df), ctx, s)
    write(found, run / "tables", origin=ctx.origin)
    H.write(found, ctx, [], run)
    write(results_table([found, *built, *late_tables(run)], ctx), run / "tables",
          formats=("parquet", "csv"),
          origin=ctx.origin)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from containmentbench.attacks.replay import reproduce

    res = reproduce(args.run, args.workers)
    for rel in res["differ"]:
        print(f"DIFFERS {rel}", file=sys.stderr)
    if res["differ"] or not res["compared"]:
        print(f"reproduce: {len(res['differ'])} of {res['compared']} files differ",
              file=sys.stderr)
        return 1
    print(f"reproduce: {res['compared']} files byte-identical to the frozen ones",
          file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("search", help="bounded adaptive candidate search (paper 000 §6.3)")
    ss = p.add_subparsers(dest="step", metavar="STEP", parser_class=type(p))
    ss.required = True
    steps = {"splits": (cmd_splits, "family-disjoint cluster splits"),
             "run": (cmd_run, "the bounded tree search (resumes from its query log)"),
             "freeze": (cmd_freeze, "frozen, hashed candidates"),
             "qualify": (cmd_qualify, "staged target-preserving qualification"),
             "defense-specific": (cmd_defense_specific,
                                  "defense-specific optimization after qualification"),
             "replay": (cmd_replay, "replay of the frozen candidates (Table 18's protocol)"),
             "tables": (cmd_tables, "Tables 18-19 and the replay funnel"),
             "reproduce": (cmd_reproduce, "recompute metrics and Tables 18-19 from the "
                                          "cached replay traces and compare bytes")}
    for name, (fn, help_) in steps.items():
        q = ss.add_parser(name, help=help_)
        if name == "reproduce":
            q.add_argument("run", type=Path, help="the run directory")
            q.add_argument("--workers", type=T.workers, default=None,
                           help="processes for the metrics (default: the machine's cores)")
            q.set_defaults(func=fn)
            continue
        if name not in ("freeze", "tables"):
            _study_args(q)
        if name in ("run", "qualify", "replay", "defense-specific"):
            q.add_argument("--splits", type=Path, required=True,
                           help="splits.json of search splits")
        if name == "run":
            q.add_argument("--search", default="target",
                           help="transfer (the paper's first search, not target-preserving) "
                                "or target (target-preserving; default)")
        if name == "qualify":
            q.add_argument("--search", type=Path, required=True,
                           help="the search folder (query log, candidates.json)")
            q.add_argument("--frozen", type=Path, required=True,
                           help="the frozen candidates folder")
        if name == "defense-specific":
            q.add_argument("--qualification", type=Path, required=True,
                           help="the qualification folder (qualification.json, rows.jsonl)")
        if name == "replay":
            q.add_argument("--adaptive", type=Path, required=True,
                           help="the run's adaptive/ folder (frozen candidates, decision)")
        if name == "freeze":
            q.add_argument("--search", type=Path, required=True,
                           help="the search folder whose candidates to freeze")
        if name == "tables":
            q.add_argument("run", type=Path, help="the run directory")
            q.add_argument("--qualification", type=Path, required=True,
                           help="the qualification folder (qualification.json, rows.jsonl)")
        if name != "tables":
            q.add_argument("--out", type=Path, required=True, help="the step's output")
        q.add_argument("--force", action="store_true",
                       help="replace a different earlier output (kept aside; in a frozen "
                            "study, under .replaced-N/)")
        q.set_defaults(func=fn)
