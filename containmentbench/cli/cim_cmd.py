"""``containmentbench cim <verb>``: delegation forensics over CIM telemetry (paper 002).

Every verb reads a CIM store: one written by ``cim export`` from rollout trace shards or by
``cim generate``. Queries print a table (``--json`` for machine-readable rows); bad input is
one line on stderr and exit 2; a broken hash chain exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

GEN_HELP = {
    "workflows": "comma-separated workflows W1,W2,W3 (§7.2.1)",
    "days": "days of telemetry", "users": "users U (Table 4: 10,000)",
    "agents": "agents A (Table 4: 100,000)", "tools_min": "fewest tools K per delegation (3)",
    "tools_max": "most tools K per delegation (7)", "files": "file universe (1e6)",
    "repos": "repository universe (1e3)", "channels": "channel universe (1e2)",
    "tickets": "ticket universe", "records": "CRM record universe",
    "delegations_per_day": "delegations per day and workflow, children included "
                           "(Table 4: 2e5-2e6)",
    "events_min": "fewest tool calls per delegation (20)",
    "events_max": "most tool calls per delegation (500)",
    "loops_w1": "mean calls per W1 delegation (50)", "loops_w2": "mean calls per W2 (60)",
    "loops_w3": "mean calls per W3 (75)",
    "overlap_rate": "share of users running concurrent delegations (10-40%%)",
    "spawn_fanout": "mean children per W2 delegation (2-5)",
    "spawn_depth": "deepest W2 re-delegation (1-4)",
    "retry_rate": "mean retries per W3 step (0-10)", "backtrack_rate": "W3 restarts per step",
    "coverage": "share of calls on gateway-mediated tools (0.8)",
    "bypass": "share of calls going around the gateway (0.05)",
    "trace_coverage_min": "least per-tool share of events with trace ids (0.6)",
    "trace_coverage_max": "most per-tool share of events with trace ids (0.8)",
    "trace_propagation": "W2 children continuing the parent's trace",
    "unbound_rate": "gateway calls without valid delegation context",
    "hint_conflict_rate": "calls whose agent hints conflict with the binding",
    "external_share_rate": "shares addressed outside the organization",
    "drift_rate": "delegations with an injected late high-impact expansion (§5.4)",
    "approval_rate": "injected drifts followed by an approval event",
    "seed": "generator seed", "chunk_events": "events per bucket file (bounds memory)",
    "row_group_rows": "Parquet row-group size"}


def _store(args: argparse.Namespace) -> Any:
    from containmentbench.cim.store import Store

    return Store(args.store)


def _plain(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _emit(args: argparse.Namespace, title: str, table: Any, info: dict[str, Any]) -> None:
    import polars as pl

    facts = {k: _plain(v) for k, v in info.items() if not isinstance(v, pl.DataFrame)}
    if getattr(args, "json", False):
        rows = [{k: _plain(v) for k, v in r.items()} for r in table.iter_rows(named=True)]
        print(json.dumps({"query": title, "info": facts, "rows": rows}, indent=2, default=str))
        return
    print(f"{title}: " + ", ".join(f"{k}={v}" for k, v in facts.items()
                                   if not isinstance(v, list) or len(v) <= 8))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=48, tbl_width_chars=240,
                   fmt_table_cell_list_len=6):
        print(table)


def _query(sub: argparse._SubParsersAction, name: str, help_: str, func: Any,
           delegation: bool = True) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_, description=help_)
    p.add_argument("--store", type=Path, required=True,
                   help="CIM store folder (from `cim export` or `cim generate`)")
    if delegation:
        p.add_argument("--delegation", required=True, help="delegation id")
    p.add_argument("--json", action="store_true", help="print rows as JSON")
    p.set_defaults(func=func)
    return p


def register(sub: argparse._SubParsersAction) -> None:
    desc = ("Delegation forensics (paper 002): export rollout traces to CIM events, generate "
            "synthetic telemetry, run delegation-scoped queries, compare reconstruction "
            "baselines and report Tables 5-7.")
    p = sub.add_parser("cim", help="CIM events, lineage queries, baselines, synthetic telemetry",
                       description=desc)
    csub = p.add_subparsers(dest="cim_verb", metavar="VERB")
    csub.required = True

    e = csub.add_parser("export", help="rollout trace shards -> CIM Parquet store / OTel JSON",
                        description="Project the gateway-emitted events of every trace shard "
                        "below --traces to CIM rows (Table 8) and write a store; optionally an "
                        "OTLP/JSON file and a tamper-evident hash chain.")
    e.add_argument("--traces", type=Path, required=True, help="folder of rollout shards")
    e.add_argument("--out", type=Path, required=True,
                   help="store folder (new or empty, or an earlier store with --force)")
    e.add_argument("--force", action="store_true", help="replace an earlier, different store "
                   "(moved aside to .<name>.replaced-<n>, never deleted)")
    e.add_argument("--format", default="parquet", help="parquet, otel or parquet,otel")
    e.add_argument("--chain", action="store_true", help="add the sha256 hash chain column")
    e.add_argument("--tick-ms", type=int, default=1000, help="milliseconds per logical tick")
    e.set_defaults(func=cmd_export)

    g = csub.add_parser("generate", help="seeded synthetic W1-W3 telemetry (Table 4)",
                        description="Stream seeded synthetic delegation telemetry (§7.1, Table "
                        "4) to a hive-partitioned CIM store with ground truth for evaluation.")
    g.add_argument("--out", type=Path, required=True,
                   help="store folder (new or empty, or an earlier store with --force)")
    g.add_argument("--force", action="store_true", help="replace an earlier, different store "
                   "(moved aside to .<name>.replaced-<n>, never deleted)")
    g.add_argument("--jobs", type=int, default=1, help="worker processes")
    g.add_argument("--chain", action="store_true", help="add the sha256 hash chain column")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    from containmentbench.cim.generator import GenParams

    for f in dataclasses.fields(GenParams):
        default = f.default
        kind = str if isinstance(default, tuple) else type(default)
        shown = ",".join(default) if isinstance(default, tuple) else default
        g.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None,
                       help=f"{GEN_HELP[f.name]} [default {shown}]")
    g.set_defaults(func=cmd_generate)

    _query(csub, "blast-radius", "Q1: resources touched under a delegation and its "
           "descendants, by resource_class and sensitivity_label (§5.1, §5.5)",
           cmd_blast).add_argument("--no-descendants", action="store_true",
                                   help="the delegation alone, without its lineage closure")
    _query(csub, "agents", "Q2: agents and instances that acted under a delegation, primary "
           "vs sub-agent (§5.5)", cmd_agents)
    _query(csub, "externalization", "Q3: shares with direction=external under a delegation "
           "and their causal ancestry (§5.5)", cmd_ext)
    _query(csub, "lineage", "ancestors and descendants of a delegation (§5.3)", cmd_lineage)
    d = _query(csub, "divergence", "authority-causality divergence: Comp(d) per delegation and "
               "components with several delegations (§5.2)", cmd_divergence, delegation=False)
    d.add_argument("--delegation", default=None, help="one delegation only")
    r = _query(csub, "drift", "execution drift: envelope expansion without an authority "
               "expansion event (§5.4)", cmd_drift, delegation=False)
    r.add_argument("--delegation", default=None, help="one delegation (default: every root)")
    r.add_argument("--baseline-frac", type=float, default=0.3,
                   help="share of early calls forming Env_0")
    r.add_argument("--min-sensitivity", default="confidential",
                   choices=("public", "internal", "confidential", "restricted"),
                   help="lowest label whose external share is high-impact (docs/cim.md)")
    r.add_argument("--no-attribute", action="store_true",
                   help="ignore unbound calls (no instance-window attribution)")
    _query(csub, "misbinding", "delegation misbinding: integrity signals and unbound events "
           "(I5, App. C.3)", cmd_misbinding, delegation=False)

    c = csub.add_parser("reconstruct", help="baselines B0-B2 vs CIM: Amb, Rec, Comp (§7.2)",
                        description="Reconstruct delegations with B0 (trace), B1 (time window), "
                        "B2 (hybrid) and CIM over each run of a store; print Table 5 metrics.")
    c.add_argument("--store", type=Path, required=True, help="CIM store folder")
    c.add_argument("--deltas", default="5,30,120", help="B1/B2 windows in seconds")
    c.add_argument("--max-buckets", type=int, default=None, help="runs per workflow to use")
    c.add_argument("--out", type=Path, default=None, help="per-delegation metrics (.parquet)")
    c.add_argument("--json", action="store_true", help="print the scores as JSON")
    c.set_defaults(func=cmd_reconstruct)

    v = csub.add_parser("verify-chain", help="verify the hash chain; names the first broken "
                        "event", description="Recompute the sha256 chain of every events file "
                        "and compare with the stored hashes and the manifest's chain heads.")
    v.add_argument("--store", type=Path, required=True, help="CIM store folder")
    v.set_defaults(func=cmd_verify)

    t = csub.add_parser("report", help="tables shaped like paper 002 Tables 5-7",
                        description="Ambiguity/recall/divergence per workflow and method, "
                        "overhead (bytes/event, gateway latency) and query construction effort.")
    t.add_argument("--store", type=Path, required=True, help="CIM store folder")
    t.add_argument("--out", type=Path, default=None, help="write the markdown here too")
    t.add_argument("--latency", action="store_true", help="measure gateway latency")
    t.add_argument("--max-buckets", type=int, default=2, help="runs per workflow to use")
    t.add_argument("--delegation", default=None, help="delegation for the Table 7 plans")
    t.set_defaults(func=cmd_report)


def cmd_export(args: argparse.Namespace) -> int:
    from containmentbench.cim.export import export_traces

    formats = {f.strip() for f in args.format.split(",") if f.strip()}
    if not formats or formats - {"parquet", "otel"}:
        raise BenchError(f"unknown format in '{args.format}' (parquet, otel)", field="format")
    if args.tick_ms < 1:
        raise BenchError("tick must be >= 1 ms", field="tick-ms")
    if not args.traces.is_dir():
        raise BenchError("no such folder", file=str(args.traces))
    s = export_traces(args.traces, args.out, parquet="parquet" in formats,
                      otel="otel" in formats, chain=args.chain, tick_us=args.tick_ms * 1000,
                      force=args.force)
    print(f"wrote {s.out}: {s.n_cim_events} CIM events from {s.n_trace_events} trace events, "
          f"{s.n_delegations} delegations, {s.n_unbound} unbound (kept); "
          f"{s.parquet_bytes / max(s.n_cim_events, 1):.1f} bytes/event Parquet"
          + (f", OTLP/JSON {s.otel_bytes:,} bytes" if s.otel_bytes else ""))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from containmentbench.cim.generator import GenParams, generate

    kw: dict[str, Any] = {}
    for f in dataclasses.fields(GenParams):
        v = getattr(args, f.name)
        if v is not None:
            kw[f.name] = tuple(x.strip() for x in v.split(",") if x.strip()) \
                if isinstance(f.default, tuple) else v
    params = GenParams(**kw)
    s = generate(params, args.out, jobs=args.jobs, chain=args.chain, progress=not args.quiet,
                 force=args.force)
    print(f"wrote {s.out}: {s.n_events:,} events, {s.n_delegations:,} delegations in "
          f"{s.n_files} files; {s.events_per_s:,.0f} events/s, "
          f"{s.bytes_per_event:.1f} bytes/event")
    return 0


def cmd_blast(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import blast_radius

    r = blast_radius(_store(args), args.delegation, not args.no_descendants)
    _emit(args, "blast-radius", r.table, r.info)
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import agent_attribution

    r = agent_attribution(_store(args), args.delegation)
    _emit(args, "agents", r.table, r.info)
    return 0


def cmd_ext(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import externalization

    r = externalization(_store(args), args.delegation)
    _emit(args, "externalization", r.table, r.info)
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import lineage

    r = lineage(_store(args), args.delegation)
    _emit(args, "lineage", r.table, r.info)
    return 0


def cmd_divergence(args: argparse.Namespace) -> int:
    from containmentbench.cim.divergence import divergence

    store = _store(args)
    if args.delegation is not None:
        store.delegation(args.delegation)  # an unknown id is bad input, not an empty answer
    r = divergence(store, delegation_id=args.delegation)
    _emit(args, "divergence", r.table, r.info)
    return 0


def cmd_drift(args: argparse.Namespace) -> int:
    from containmentbench.cim.drift import drift

    if not 0 < args.baseline_frac < 1:
        raise BenchError("must lie in (0, 1)", field="baseline-frac")
    store = _store(args)
    if args.delegation is not None:
        store.delegation(args.delegation)
    r = drift(store, args.delegation, args.baseline_frac,
              min_sensitivity=args.min_sensitivity, attribute=not args.no_attribute)
    _emit(args, "drift", r.table, r.info)
    return 0


def cmd_misbinding(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import misbinding

    r = misbinding(_store(args))
    _emit(args, "misbinding", r.table, r.info)
    if not args.json:
        import polars as pl

        with pl.Config(tbl_rows=50, tbl_cols=-1, fmt_str_lengths=40, tbl_width_chars=240):
            print(r.info["events"].head(50))
    return 0


def _deltas(text: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise BenchError(f"expected comma-separated seconds, got '{text}'",
                         field="deltas") from None
    if not out or min(out) <= 0:
        raise BenchError("windows must be positive seconds", field="deltas")
    return out


def cmd_reconstruct(args: argparse.Namespace) -> int:
    import polars as pl

    if args.out:
        _own_file(args.out, (".parquet",), "cim-reconstruct")

    from containmentbench.cim.reconstruct import reconstruct_store, summarize

    deltas = _deltas(args.deltas)
    t0 = time.perf_counter()
    if args.max_buckets is not None and args.max_buckets < 1:
        raise BenchError("must be >= 1", field="max-buckets")
    per, runs = reconstruct_store(_store(args), deltas, args.max_buckets)
    if per.height == 0:
        raise BenchError("no covered, bound events to evaluate", file=str(args.store))
    summ = summarize(per, ["workflow"])
    if args.out:
        from containmentbench.integrity import writer

        writer.write_bytes(args.out, writer.parquet_bytes(per.to_arrow()), kind="cim-reconstruct")
    info = {"runs": runs.height, "evaluated": int(runs["n_evaluated"].sum()),
            "uncovered": int(runs["n_uncovered"].sum()),
            "unbound": int(runs["n_unbound"].sum()),
            "seconds": round(time.perf_counter() - t0, 2)}
    _emit(args, "reconstruct", summ.with_columns(pl.col(pl.Float64).round(4)), info)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from containmentbench.cim.seal import audit_store
    from containmentbench.integrity.keys import NO_KEY_NOTE, load_key

    store = _store(args)
    key = load_key(store.root)
    problems = audit_store(store.root, store.manifest, store.files, key)
    if key is None:
        print(f"verify-chain: {NO_KEY_NOTE}", file=sys.stderr)
    for p in problems:
        print(f"BROKEN {p}", file=sys.stderr)
    if problems:
        print(f"verify-chain: {len(problems)} problem(s) in {store.root}", file=sys.stderr)
        return 1
    print(f"hash chain intact: {len(store.files)} files"
          + (" (keyed)" if key is not None else ""))
    return 0


def _own_file(out: Path, suffixes: tuple[str, ...], kind: str) -> None:
    """A --out file: new, or an earlier one of this kind (never a folder or another file)."""
    from containmentbench.integrity import writer

    if out.suffix not in suffixes:
        raise BenchError(f"expected a {' or '.join(suffixes)} file name", file=str(out),
                         field="out")
    writer.check_file(out, kind)


def cmd_report(args: argparse.Namespace) -> int:
    from containmentbench.cim.report import report

    if args.out:
        _own_file(args.out, (".md", ".txt"), "cim-report")
    if args.max_buckets is not None and args.max_buckets < 1:
        raise BenchError("must be >= 1", field="max-buckets")
    text, _ = report(_store(args), latency=args.latency, max_buckets=args.max_buckets,
                     effort_delegation=args.delegation)
    if args.out:
        from containmentbench.integrity import writer

        writer.write_text(args.out, text + "\n", kind="cim-report")
    sys.stdout.write(text + "\n")
    return 0
