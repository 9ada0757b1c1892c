"""``containmentbench cim <verb>``: delegation forensics over CIM telemetry (paper 002).

Every verb reads a CIM store: one written by ``cim export`` from rollout trace shards or by
``cim generate``. Queries print a table (``--json`` for machine-readable rows); bad input is
one line on stderr and exit 2; a broken hash chain exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from containmentbench.cli import argtypes as T
from containmentbench.cli.cim_common import GEN_HELP, emit, own_file, store_of
from containmentbench.errors import BenchError


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
    e.add_argument("--format", default="parquet",
                   help="comma-separated: parquet, otel (OTLP/JSON traces and decision logs), "
                   "otel-proto (the same as OTLP protobuf; needs the 'otel' extra)")
    e.add_argument("--otel-max-mb", type=T.float_range(0.01, 1024.0), default=4.0,
                   help="most MiB of OTLP/JSON per file (files are cut into batches)")
    e.add_argument("--chain", action="store_true", help="add the sha256 hash chain column")
    e.add_argument("--tick-ms", type=T.positive_int, default=1000,
                   help="milliseconds per logical tick")
    e.set_defaults(func=cmd_export)

    i = csub.add_parser("import", help="OTLP/JSON traces (from `cim export`) -> CIM store",
                        description="Read every traces-*.json of an OTLP folder back into CIM "
                        "rows and write a store; a malformed file is named with its field.")
    i.add_argument("--otlp", type=Path, required=True, help="folder of traces-*.json")
    i.add_argument("--out", type=Path, required=True, help="new store folder")
    i.set_defaults(func=cmd_import)

    g = csub.add_parser("generate", help="seeded synthetic W1-W3 telemetry (Table 4)",
                        description="Stream seeded synthetic delegation telemetry (§7.1, Table "
                        "4) to a hive-partitioned CIM store with ground truth for evaluation.")
    g.add_argument("--out", type=Path, required=True,
                   help="store folder (new or empty, or an earlier store with --force)")
    g.add_argument("--force", action="store_true", help="replace an earlier, different store "
                   "(moved aside to .<name>.replaced-<n>, never deleted)")
    g.add_argument("--jobs", type=T.positive_int, default=1, help="worker processes")
    g.add_argument("--chain", action="store_true", help="add the sha256 hash chain column")
    g.add_argument("--quiet", action="store_true", help="no progress lines")
    from containmentbench.cim.catalog import GenParams

    for f in dataclasses.fields(GenParams):
        default = f.default
        # counts, rates and the seed are never negative (GenParams.validate adds the tighter
        # ranges, one line naming the parameter, before any file is written)
        kind = str if isinstance(default, tuple) else T.seed if f.name == "seed" else \
            T.non_negative_int if isinstance(default, int) else T.float_range(0.0)
        shown = ",".join(default) if isinstance(default, tuple) else default
        g.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None,
                       help=f"{GEN_HELP[f.name]} [default {shown}]")
    g.set_defaults(func=cmd_generate)

    from containmentbench.cli.cim_deploy_cmd import register as register_deploy

    register_deploy(csub)
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
    r.add_argument("--baseline-frac", type=T.float_range(0.0, 1.0, open_lo=True, open_hi=True),
                   default=0.3,
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
    c.add_argument("--max-buckets", type=T.positive_int, default=None,
                   help="runs per workflow to use")
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
    t.add_argument("--latency", action="store_true",
                   help="show the gateway latency the micro-deployment recorded")
    t.add_argument("--max-buckets", type=T.positive_int, default=2, help="runs per workflow to use")
    t.add_argument("--delegation", default=None,
                   help="comma-separated delegations for the six-query suite "
                   "(default: two roots per workflow)")
    t.add_argument("--suite-repeats", type=T.positive_int, default=3,
                   help="timed runs per suite plan after one warm-up")
    t.set_defaults(func=cmd_report)


def cmd_export(args: argparse.Namespace) -> int:
    from containmentbench.cim.export import export_traces

    formats = {f.strip() for f in args.format.split(",") if f.strip()}
    if not formats or formats - {"parquet", "otel", "otel-proto"}:
        raise BenchError(f"unknown format in '{args.format}' (parquet, otel, otel-proto)",
                         field="format")
    if not 0.01 <= args.otel_max_mb <= 1024:
        raise BenchError("must lie in [0.01, 1024]", field="otel-max-mb")
    if "otel-proto" in formats:
        from containmentbench.cim.otel import to_protobuf

        to_protobuf({"resourceSpans": []})  # the extra is missing: say so before any work
    if args.tick_ms < 1:
        raise BenchError("tick must be >= 1 ms", field="tick-ms")
    if not args.traces.is_dir():
        raise BenchError("no such folder", file=str(args.traces))
    s = export_traces(args.traces, args.out, parquet="parquet" in formats,
                      otel=bool(formats & {"otel", "otel-proto"}), chain=args.chain,
                      tick_us=args.tick_ms * 1000, force=args.force,
                      otel_proto="otel-proto" in formats,
                      otel_max_bytes=int(args.otel_max_mb * (1 << 20)))
    print(f"wrote {s.out}: {s.n_cim_events} CIM events from {s.n_trace_events} trace events, "
          f"{s.n_delegations} delegations, {s.n_unbound} unbound (kept); "
          f"{s.parquet_bytes / max(s.n_cim_events, 1):.1f} bytes/event Parquet"
          + (f", OTLP/JSON {s.otel_bytes:,} bytes in {s.otel_spans:,} spans "
             f"({s.otel_bytes / max(s.n_cim_events, 1):.0f} bytes/event)"
             if s.otel_bytes else ""))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from containmentbench.cim.otel import read_otlp
    from containmentbench.cim.schema import validate
    from containmentbench.cim.store import write_store
    from containmentbench.integrity import writer

    if not args.otlp.is_dir():
        raise BenchError("no such folder", file=str(args.otlp))
    writer.check_out(args.out, "cim-store")  # a foreign --out is refused before any work
    table = read_otlp(args.otlp)  # malformed input: one line naming file and field
    validate(table, str(args.otlp))
    write_store(args.out, table, workflow="otlp", manifest={"producer": "cim import",
                                                             "source": str(args.otlp)})
    print(f"wrote {args.out}: {table.num_rows} CIM events from OTLP spans in {args.otlp}")
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

    r = blast_radius(store_of(args), args.delegation, not args.no_descendants)
    emit(args, "blast-radius", r.table, r.info)
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import agent_attribution

    r = agent_attribution(store_of(args), args.delegation)
    emit(args, "agents", r.table, r.info)
    return 0


def cmd_ext(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import externalization

    r = externalization(store_of(args), args.delegation)
    emit(args, "externalization", r.table, r.info)
    return 0


def cmd_lineage(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import lineage

    r = lineage(store_of(args), args.delegation)
    emit(args, "lineage", r.table, r.info)
    return 0


def cmd_divergence(args: argparse.Namespace) -> int:
    from containmentbench.cim.divergence import divergence

    store = store_of(args)
    if args.delegation is not None:
        store.delegation(args.delegation)  # an unknown id is bad input, not an empty answer
    r = divergence(store, delegation_id=args.delegation)
    emit(args, "divergence", r.table, r.info)
    return 0


def cmd_drift(args: argparse.Namespace) -> int:
    from containmentbench.cim.drift import drift

    if not 0 < args.baseline_frac < 1:
        raise BenchError("must lie in (0, 1)", field="baseline-frac")
    store = store_of(args)
    if args.delegation is not None:
        store.delegation(args.delegation)
    r = drift(store, args.delegation, args.baseline_frac,
              min_sensitivity=args.min_sensitivity, attribute=not args.no_attribute)
    emit(args, "drift", r.table, r.info)
    return 0


def cmd_misbinding(args: argparse.Namespace) -> int:
    from containmentbench.cim.queries import misbinding

    r = misbinding(store_of(args))
    emit(args, "misbinding", r.table, r.info)
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
        own_file(args.out, (".parquet",), "cim-reconstruct")

    from containmentbench.cim.reconstruct import reconstruct_store, summarize

    deltas = _deltas(args.deltas)
    t0 = time.perf_counter()
    if args.max_buckets is not None and args.max_buckets < 1:
        raise BenchError("must be >= 1", field="max-buckets")
    per, runs = reconstruct_store(store_of(args), deltas, args.max_buckets)
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
    emit(args, "reconstruct", summ.with_columns(pl.col(pl.Float64).round(4)), info)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from containmentbench.cim.seal import audit_store
    from containmentbench.integrity.keys import NO_KEY_NOTE, load_key

    store = store_of(args)
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




def cmd_report(args: argparse.Namespace) -> int:
    from containmentbench.cim.report import report

    if args.out:
        own_file(args.out, (".md", ".txt"), "cim-report")
    if args.max_buckets is not None and args.max_buckets < 1:
        raise BenchError("must be >= 1", field="max-buckets")
    if args.suite_repeats < 1:
        raise BenchError("must be >= 1", field="suite-repeats")
    store = store_of(args)
    chosen = None
    if args.delegation:
        chosen = [d.strip() for d in args.delegation.split(",") if d.strip()]
        for d in chosen:
            store.delegation(d)  # an unknown id is bad input, before any work
    text, _ = report(store, latency=args.latency, max_buckets=args.max_buckets,
                     suite_delegations=chosen, suite_repeats=args.suite_repeats)
    if args.out:
        from containmentbench.integrity import writer

        writer.write_text(args.out, text + "\n", kind="cim-report")
    sys.stdout.write(text + "\n")
    return 0

