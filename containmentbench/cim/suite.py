"""The six-query suite of paper 002 §7.4 / App. E (Table 9), its runtimes (Table 6's query
row) and Table 7's step counts, all from the plans that actually run (plans.py).

§7.4 names five items of "a fixed suite of six representative delegation-scoped questions":
(i) delegation closure filtering, (ii) cross-tool sequence detection, and "correlation
baselines approximating these views via" (iii) trace-only grouping, (iv) window correlation
(Delta sweep) and (v) hybrid stitching over trace/session/task identifiers with a window
fallback. Table 9's body is not in the text we have. We read (iii)-(v) as questions too:
each reconstructs a delegation's cross-system touch set (Table 7's "cross-system
reconstruction") with one correlation strategy, so every item has a baseline plan and a CIM
plan. **The sixth is reconstructed** (docs/cim.md §6): Table 7 has four query classes and
only "drift / envelope expansion" has no §7.4 item; §5.4 defines it and App. E's threshold
note fits it, so (vi) is drift: late high-impact envelope expansion without an authority
expansion event.

Baseline plans of (i), (ii) and (vi) use the hybrid strategy of (v) — §7.2.2's strongest
baseline; every Delta-dependent baseline plan runs at each Delta of the sweep (§7.1: "the
same Delta values in query benchmarks").

Runtime (§7.4 "repeated runs with warm-up"): per delegation, each plan is built and
collected once to warm up, then ``repeats`` times; its time is the median of the repeats, and
a query's runtime is the median over the sampled delegations. Reference tables (operation
catalog, resource catalog, directory) are built outside the timing: they are maintained data.

Step counts: ``steps`` = every op a plan applies; ``corr_ops`` = App. E's correlation and
normalization operations only (joins, normalization/lookups, identity unification, windows,
heuristic split/merge), the quantity Table 7 counts ("number of correlation and
normalization operations"); the rest are the question's own filters and aggregates.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import polars as pl

from containmentbench.cim import plans as P
from containmentbench.cim.plans import Op, Plan
from containmentbench.cim.store import Store

DELTAS_S = (5.0, 30.0, 120.0)
CORR = ("join", "normalize", "identity", "window", "heuristic")
# Paper 002 Table 7: (baseline ops range, CIM ops range) per query class.
PAPER_T7: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "cross_system_reconstruction": ((6, 9), (1, 2)),
    "authority_propagation": ((5, 8), (1, 2)),
    "drift_envelope": ((7, 11), (2, 2)),
    "exfiltration_sequence": ((8, 14), (2, 3))}

_NORM = Op("normalize", "per-tool operation -> Tier-1 verb", P.normalize_ops)
_LOOK = Op("normalize", "resource catalog lookup (class, label)", P.lookup_resources)
_IDEN = Op("identity", "agent instance -> user directory", P.unify_identity)
_WIN = Op("window", "Delta gap chain per user", P.window_units)
_STITCH = Op("heuristic", "stitch trace/session context", P.stitch_context)
_MERGE = Op("heuristic", "merge windows sharing a context", P.merge_by_context)
_SEED = Op("join", "the seed event's unit", P.seed_unit)
_SPAWN = Op("heuristic", "instances starting inside the unit (sub-agents)",
            P.spawned_instances)
_CALLS = Op("filter", "tool-call rows", P.calls_only)
_TOUCH = Op("aggregate", "touch set by class/label", P.touch_set)
_HYBRID = (_IDEN, _WIN, _STITCH, _MERGE)
_SEQ = (Op("aggregate", "running count_distinct of reads and read tools", P.running_reads),
        Op("filter", "mutation after >= k reads on >= 2 tools", P.sequence_hits))
_ENV = (Op("aggregate", "envelope first occurrence", P.envelope),
        Op("filter", "late high-impact tuples", P.late_high_impact))
_D_CALLS = Op("filter", "delegation_id = d, tool calls", P.delegation_calls)
_CLOSURE = Op("join", "lineage closure from the side table", P.in_closure)


@dataclass(frozen=True, slots=True)
class Query:
    key: str
    number: str
    question: str
    source: str
    query_class: str
    strategy: str
    baseline: Plan
    cim: Plan
    windowed: bool


SUITE: tuple[Query, ...] = (
    Query("closure", "i", "delegation closure filtering: agents and instances under d and "
          "its descendants", "§7.4 (i); §4.2.1 (ii); §5.3", "authority_propagation", "hybrid",
          Plan((_LOOK, *_HYBRID, _SPAWN,
                Op("aggregate", "agents and instances", P.agents_by_instance))),
          Plan((_CLOSURE, Op("aggregate", "agents and instances", P.agents_by_instance))),
          True),
    Query("sequence", "ii", "cross-tool sequence detection: a mutation after reads of >= k "
          "resources on >= 2 tools", "§7.4 (ii); App. E thresholds", "exfiltration_sequence",
          "hybrid", Plan((_NORM, *_HYBRID, _SEED, _CALLS, *_SEQ)),
          Plan((_D_CALLS, *_SEQ)), True),
    Query("trace", "iii", "d's cross-system touch set by trace-only grouping", "§7.4 (iii); "
          "§7.2.2 B0", "cross_system_reconstruction", "trace",
          Plan((_NORM, _LOOK, Op("heuristic", "trace -> session -> singleton fallback",
                                 P.trace_units), _SEED, _CALLS, _TOUCH)),
          Plan((_D_CALLS, _TOUCH)), False),
    Query("window", "iv", "d's cross-system touch set by window correlation (Delta sweep)",
          "§7.4 (iv); §7.2.2 B1", "cross_system_reconstruction", "window",
          Plan((_NORM, _LOOK, _IDEN, _WIN, _SEED, _CALLS, _TOUCH)),
          Plan((_D_CALLS, _TOUCH)), True),
    Query("hybrid", "v", "d's cross-system touch set by hybrid stitching (trace/session, "
          "window fallback)", "§7.4 (v); §7.2.2 B2", "cross_system_reconstruction", "hybrid",
          Plan((_NORM, _LOOK, *_HYBRID, _SEED, _CALLS, _TOUCH)),
          Plan((_D_CALLS, _TOUCH)), True),
    Query("drift", "vi", "drift: late high-impact envelope expansion without an authority "
          "expansion event (reconstructed)", "§5.4; Table 7 drift class",
          "drift_envelope", "hybrid",
          Plan((_NORM, _LOOK, Op("normalize", "recipient domain -> external",
                                 P.classify_recipients), *_HYBRID, _SPAWN, _CALLS, *_ENV)),
          Plan((Op("join", "lineage closure from the side table, tool calls",
                   P.closure_calls), *_ENV,
                Op("join", "approvals in the lineage after the change", P.unapproved))),
          False),
)


def counts(plan: Plan) -> dict[str, int]:
    cat = plan.categories()
    return {"steps": plan.n_ops, "corr_ops": sum(cat[c] for c in CORR)}


def pick(store: Store, per_workflow: int = 3) -> list[str]:
    """Root delegations with events, evenly spaced in id order within each workflow
    (deterministic), preferring roots with descendants so closure has something to find."""
    side = store.delegations().collect()
    kids = side.group_by("root_delegation_id").agg(pl.len().alias("fam"))
    roots = (side.filter((pl.col("depth") == 0) & (pl.col("n_events") > 0))
             .join(kids, left_on="delegation_id", right_on="root_delegation_id", how="left")
             .sort("workflow", "delegation_id"))
    out = []
    for (_,), grp in roots.group_by(["workflow"], maintain_order=True):
        multi = grp.filter(pl.col("fam") > 1)
        pool = (multi if multi.height >= per_workflow else grp)["delegation_id"].to_list()
        step = max(len(pool) // per_workflow, 1)
        out += pool[::step][:per_workflow]
    return out


def _time(lf_fn: Any, repeats: int) -> tuple[float, int]:
    lf_fn().collect()  # warm-up
    ts, n = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = lf_fn().collect().height
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), n


def run(store: Store, delegations: list[str] | None = None, *, deltas: tuple[float, ...] =
        DELTAS_S, repeats: int = 3, per_workflow: int = 3) -> pl.DataFrame:
    """One row per (query, method, Delta, delegation): seconds, result rows, step counts."""
    rows: list[dict[str, Any]] = []
    for d in delegations or pick(store, per_workflow):
        for delta in deltas:
            base = P.sources(store, d, delta)
            if not base.seed_event:
                break
            cim = P.cim_sources(base, store)
            for q in SUITE:
                runs = [("baseline", q.baseline, base)] if q.windowed or delta == deltas[0] \
                    else []
                if delta == deltas[0]:
                    runs.append(("CIM", q.cim, cim))
                for method, plan, src in runs:
                    secs, n = _time(lambda p=plan, s=src: p.build(s), repeats)
                    rows.append({"query": q.key, "method": method,
                                 "delta_s": delta if method == "baseline" and q.windowed
                                 else None, "delegation_id": d, "seconds": secs,
                                 "result_rows": n, **counts(plan)})
    return pl.DataFrame(rows, schema={
        "query": pl.String, "method": pl.String, "delta_s": pl.Float64,
        "delegation_id": pl.String, "seconds": pl.Float64, "result_rows": pl.Int64,
        "steps": pl.Int64, "corr_ops": pl.Int64})


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def _rng(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def table9(res: pl.DataFrame) -> list[list[str]]:
    """Rows of the six-query table: ours beside Table 7's paper range for the class."""
    out = []
    for q in SUITE:
        b, c = counts(q.baseline), counts(q.cim)
        pb, pc = PAPER_T7[q.query_class]
        sub = res.filter(pl.col("query") == q.key)
        cim_s = sub.filter(pl.col("method") == "CIM")["seconds"]
        base = sub.filter(pl.col("method") == "baseline")
        per_d = (base.group_by("delta_s", maintain_order=True)
                 .agg(pl.col("seconds").median(), pl.col("result_rows").median())
                 .sort("delta_s", nulls_last=True))
        times = " / ".join((f"{_ms(r['seconds'])}" if r["delta_s"] is None
                            else f"{r['delta_s']:.0f}s: {_ms(r['seconds'])}")
                           for r in per_d.iter_rows(named=True))
        cim_med = cim_s.median() if cim_s.len() else None
        base_med = base["seconds"].median() if base.height else None
        ratio = f"{base_med / cim_med:.2f}x" if base_med and cim_med else "-"
        rr = (f"{base['result_rows'].median():.0f} / "
              f"{sub.filter(pl.col('method') == 'CIM')['result_rows'].median():.0f}"
              if base.height and cim_s.len() else "-")
        out.append([f"({q.number}) {q.key}", q.question, q.source,
                    q.query_class.replace("_", " "), q.strategy,
                    f"{b['corr_ops']} ({b['steps']})", f"{c['corr_ops']} ({c['steps']})",
                    f"{_rng(*pb)} / {_rng(*pc)}", times or "-", _ms(cim_med), ratio, rr])
    return out


TABLE9_HEAD = ["Query", "Question", "Paper", "Table 7 class", "Baseline strategy",
               "Baseline ops (steps)", "CIM ops (steps)", "Paper ops baseline / CIM",
               "Baseline ms (median)", "CIM ms (median)", "baseline/CIM",
               "Result rows baseline / CIM"]


def table7() -> list[list[str]]:
    """Table 7 per query class: ranges over the suite queries of that class (ops counted
    from the plan objects that run), beside the paper's ranges."""
    out = []
    for qc, (pb, pc) in PAPER_T7.items():
        qs = [q for q in SUITE if q.query_class == qc]
        b = [counts(q.baseline) for q in qs]
        c = [counts(q.cim) for q in qs]
        out.append([qc.replace("_", " "), ", ".join(f"({q.number})" for q in qs),
                    _rng(min(x["corr_ops"] for x in b), max(x["corr_ops"] for x in b)),
                    _rng(min(x["corr_ops"] for x in c), max(x["corr_ops"] for x in c)),
                    _rng(min(x["steps"] for x in b), max(x["steps"] for x in b)),
                    _rng(min(x["steps"] for x in c), max(x["steps"] for x in c)),
                    _rng(*pb), _rng(*pc)])
    return out


TABLE7_HEAD = ["Query class", "Suite queries", "Baseline ops", "CIM ops",
               "Baseline steps (all)", "CIM steps (all)", "Paper baseline ops",
               "Paper CIM ops"]


def runtime_row(res: pl.DataFrame) -> dict[str, float | None]:
    """Table 6's query-runtime row: median seconds over every timed baseline / CIM plan."""
    b = res.filter(pl.col("method") == "baseline")["seconds"]
    c = res.filter(pl.col("method") == "CIM")["seconds"]
    return {"baseline_s": b.median() if b.len() else None,
            "cim_s": c.median() if c.len() else None,
            "n_baseline": b.len(), "n_cim": c.len()}
