"""Query construction effort (paper 002 Table 7, §7.4, App. E "What operations mean").

Each query class has two executable plans over the same store: a *baseline* plan that sees
only the baseline field set (schema.BASELINE_FIELDS: audit/trace attributes) plus reference
sources an analyst would join (a per-tool operation catalog, a resource metadata catalog, an
identity directory), and a *CIM* plan over delegation-scoped predicates. A plan is a tuple
of ``Op`` objects, each one step of App. E's taxonomy — (i) cross-source join, (ii) schema
mapping / normalization / lookup, (iii) identity unification, (iv) windowed correlation,
(v) heuristic post-processing — or a filter/aggregate. ``Plan.n_ops`` counts the ops the
plan actually applies; ``polars_nodes`` counts operator nodes of the polars logical plan the
ops build, as an independent count. Neither is a constant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from containmentbench.cim.schema import BASELINE_FIELDS
from containmentbench.cim.store import Store

Frame = Callable[[pl.LazyFrame, "Sources"], pl.LazyFrame]
CATEGORIES = ("join", "normalize", "identity", "window", "heuristic", "filter", "aggregate")


@dataclass(frozen=True, slots=True)
class Op:
    category: str
    note: str
    apply: Frame


@dataclass(frozen=True, slots=True)
class Sources:
    """What a plan may read: the event view and reference tables, plus the query input."""

    events: pl.LazyFrame          # baseline view or full CIM rows
    operations: pl.LazyFrame      # tool_operation -> action_semantic (per-tool rules)
    resources: pl.LazyFrame       # resource_id -> resource_class, sensitivity_label
    directory: pl.LazyFrame       # agent_instance_id -> principal_user_id
    side: pl.LazyFrame            # delegation side table (CIM plans only)
    delegation_id: str
    root_id: str
    seed_event: str               # the delegation's first tool call (baseline entry point)
    delta_s: float


@dataclass(frozen=True, slots=True)
class Plan:
    query_class: str
    method: str
    ops: tuple[Op, ...]

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def build(self, src: Sources) -> pl.LazyFrame:
        lf = src.events
        for op in self.ops:
            lf = op.apply(lf, src)
        return lf

    def categories(self) -> dict[str, int]:
        return {c: sum(op.category == c for op in self.ops) for c in CATEGORIES}


_NODES = ("AGGREGATE", "FILTER", "SORT BY", "WITH_COLUMNS", "SELECT", "LEFT JOIN",
          "INNER JOIN", "SEMI JOIN", "ANTI JOIN", "CROSS JOIN", "FULL JOIN", "UNIQUE",
          "SLICE")


def polars_nodes(lf: pl.LazyFrame) -> int:
    """Operator nodes in the unoptimized polars plan (joins counted once)."""
    lines = [ln.strip() for ln in lf.explain(optimized=False).splitlines()]
    return sum(1 for ln in lines if ln.startswith(_NODES) and not ln.startswith("END"))


# ------------------------------------------------------------------ shared baseline steps

def _normalize(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.join(s.operations, on="tool_operation", how="left")


def _lookup(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.join(s.resources, on="resource_id", how="left")


def _identity(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.join(s.directory, on="agent_instance_id", how="left", suffix="_dir").with_columns(
        pl.coalesce("principal_user_id", "principal_user_id_dir").alias("user"))


def _window(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    gap = pl.col("time").diff().over("user").dt.total_microseconds() > int(s.delta_s * 1e6)
    return lf.sort("user", "time").with_columns(
        (gap.fill_null(True) | (pl.col("user") != pl.col("user").shift(1)).fill_null(True))
        .cum_sum().alias("window"))


def _stitch(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.with_columns(pl.coalesce("trace_id", "session_id").alias("ctx"))


def _merge(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    # retries/backtracking and overlap: a trace/session spanning windows joins them all
    return lf.with_columns(pl.col("window").min().over("ctx").fill_null(pl.col("window"))
                           .alias("unit"))


def _seed_unit(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    seed = lf.filter(pl.col("event_id") == s.seed_event).select("unit")
    return lf.join(seed, on="unit", how="semi")


_BASE_RECON = (Op("normalize", "per-tool operation -> verb", _normalize),
               Op("normalize", "resource metadata lookup (class, label)", _lookup),
               Op("identity", "agent instance -> user directory", _identity),
               Op("window", "Delta window per user", _window),
               Op("heuristic", "stitch trace/session context", _stitch),
               Op("heuristic", "merge windows sharing a context", _merge),
               Op("join", "select the seed event's unit", _seed_unit))


def _closure(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    fam = s.side.filter(pl.col("root_delegation_id") == s.root_id).select("delegation_id")
    return lf.join(fam, on="delegation_id", how="semi")


def _in_d(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.filter(pl.col("delegation_id") == s.delegation_id)


def _touch(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.group_by("resource_class", "sensitivity_label").agg(
        pl.col("resource_id").drop_nulls().n_unique().alias("n_resources"))


def _agents(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.group_by("agent_id", "agent_instance_id").agg(pl.len().alias("n_events"))


def _spawned(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    # sub-agents: instances of the same user whose first event falls within Delta of the unit
    return lf.with_columns(pl.col("time").min().over("agent_instance_id").alias("inst_start"))


def _envelope(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.group_by("tool_name", "action_semantic", "resource_class",
                       "sensitivity_label").agg(pl.col("time").min().alias("first_seen"))


def _phase(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    t0 = pl.col("first_seen").min()
    t1 = pl.col("first_seen").max()
    return lf.with_columns((pl.col("first_seen") > t0 + (t1 - t0) * 0.3).alias("late"))


def _external(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.filter((pl.col("action_semantic") == "share") & (pl.col("direction") == "external"))


def _classify_recipient(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    # without Tier-2 direction the analyst classifies recipients by domain
    return lf.with_columns(
        (pl.col("target_principal_id").str.contains("@")
         & ~pl.col("target_principal_id").str.contains("@corp")).fill_null(False)
        .alias("external"))


def _shares(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.filter((pl.col("action_semantic") == "share") & pl.col("external"))


def _ancestry(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    parents = s.events.select(pl.col("span_id").alias("parent_span_id"),
                        pl.col("event_id").alias("parent_event"),
                        pl.col("resource_id").alias("parent_resource"))
    return lf.join(parents, on="parent_span_id", how="left")


def _preceding_reads(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    reads = lf.filter(pl.col("action_semantic").is_in(["read", "search"])).select(
        "unit", pl.col("time").alias("read_time"), pl.col("resource_id").alias("read_res"))
    return lf.filter(pl.col("external")).join(reads, on="unit", how="left").filter(
        pl.col("read_time") <= pl.col("time"))


def _count(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.group_by("event_id").agg(pl.len().alias("n_ancestors"))


PLANS: dict[tuple[str, str], Plan] = {
    ("cross_system_reconstruction", "baseline"): Plan(
        "cross_system_reconstruction", "baseline",
        (*_BASE_RECON, Op("aggregate", "touch set by class/label", _touch))),
    ("cross_system_reconstruction", "CIM"): Plan(
        "cross_system_reconstruction", "CIM",
        (Op("filter", "delegation_id = d", _in_d),
         Op("aggregate", "touch set by class/label", _touch))),
    ("authority_propagation", "baseline"): Plan(
        "authority_propagation", "baseline",
        (*_BASE_RECON[2:], Op("heuristic", "instances starting inside the unit", _spawned),
         Op("aggregate", "agents and instances", _agents))),
    ("authority_propagation", "CIM"): Plan(
        "authority_propagation", "CIM",
        (Op("join", "lineage closure from the side table", _closure),
         Op("aggregate", "agents and instances", _agents))),
    ("drift_envelope", "baseline"): Plan(
        "drift_envelope", "baseline",
        (*_BASE_RECON, Op("aggregate", "envelope first occurrence", _envelope),
         Op("heuristic", "early vs late phase", _phase))),
    ("drift_envelope", "CIM"): Plan(
        "drift_envelope", "CIM",
        (Op("join", "lineage closure from the side table", _closure),
         Op("aggregate", "envelope first occurrence", _envelope))),
    ("exfiltration_sequence", "baseline"): Plan(
        "exfiltration_sequence", "baseline",
        (*_BASE_RECON, Op("normalize", "recipient domain -> external", _classify_recipient),
         Op("join", "reads preceding the share in the unit", _preceding_reads),
         Op("aggregate", "reads per share", _count))),
    ("exfiltration_sequence", "CIM"): Plan(
        "exfiltration_sequence", "CIM",
        (Op("join", "lineage closure from the side table", _closure),
         Op("filter", "share with direction=external", _external),
         Op("join", "causal ancestry by parent_span_id", _ancestry))),
}


def sources(store: Store, delegation_id: str, delta_s: float = 30.0) -> Sources:
    """Sources for one delegation: baseline view of its file(s) and reference tables."""
    row = store.delegation(delegation_id)
    files = [row["file"]]
    full = store.scan(files)
    seed = (full.filter((pl.col("delegation_id") == delegation_id)
                        & (pl.col("event_kind") == "proposal"))
            .sort("time").select("event_id").head(1).collect())
    if seed.height == 0:
        seed = full.filter(pl.col("delegation_id") == delegation_id).select("event_id") \
            .head(1).collect()
    ops = full.select("tool_operation", "action_semantic").unique("tool_operation")
    res = full.select("resource_id", "resource_class", "sensitivity_label").drop_nulls(
        "resource_id").unique("resource_id")
    dirs = full.select("agent_instance_id", "principal_user_id").drop_nulls().unique(
        "agent_instance_id")
    return Sources(full.select(BASELINE_FIELDS), ops, res, dirs, store.delegations(),
                   delegation_id, row["root_delegation_id"], seed.item() if seed.height else "",
                   delta_s)


def cim_sources(src: Sources, store: Store) -> Sources:
    """The same query input with the full CIM rows as the event view."""
    row = store.delegation(src.delegation_id)
    return replace(src, events=store.scan([row["file"]]))


def effort(store: Store, delegation_id: str, delta_s: float = 30.0) -> list[dict[str, Any]]:
    """Table 7 rows: ops per plan (from the plan objects), polars nodes, result rows."""
    base = sources(store, delegation_id, delta_s)
    cim = cim_sources(base, store)
    rows = []
    for (qc, method), plan in PLANS.items():
        src = base if method == "baseline" else cim
        lf = plan.build(src)
        rows.append({"query_class": qc, "method": method, "n_ops": plan.n_ops,
                     "polars_nodes": polars_nodes(lf), "result_rows": lf.collect().height,
                     **{f"n_{k}": v for k, v in plan.categories().items()}})
    return rows
