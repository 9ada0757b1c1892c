"""Executable query plans: the operator steps of paper 002 App. E ("What operations mean").

A plan is a tuple of ``Op`` objects applied to a polars lazy frame. Each op is one step of
App. E's taxonomy — (i) cross-source join, (ii) schema mapping / per-source normalization /
lookup, (iii) identity unification, (iv) windowed correlation (Delta t), (v) heuristic
post-processing (split/merge decisions) — or the query's own filter/aggregate. ``Plan.n_ops``
counts the ops a plan actually applies, so Table 7's step counts come from the plans that
run (suite.py), never from constants; ``polars_nodes`` counts the operator nodes of the polars
logical plan the ops build, as an independent count.

*Baseline* plans see only the baseline field set (schema.BASELINE_FIELDS: what audit logs
and traces carry) plus the reference sources an analyst joins: a per-tool operation catalog
(operation -> Tier-1 verb), a resource catalog (id -> class, sensitivity) and an identity
directory (agent instance -> user). They must rebuild a delegation's unit from correlation
hints, starting from the delegation's first tool call (the investigation's seed event).
*CIM* plans read the CIM rows and the delegation side table and filter on delegation ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from containmentbench.cim.lineage import Lineage
from containmentbench.cim.schema import BASELINE_FIELDS, SENSITIVITY_ORDER
from containmentbench.cim.store import Store

Frame = Callable[[pl.LazyFrame, "Sources"], pl.LazyFrame]
CATEGORIES = ("join", "normalize", "identity", "window", "heuristic", "filter", "aggregate")
READ_VERBS = ("read", "search", "enumerate")
MUTATING_VERBS = ("write", "delete", "move", "share", "revoke", "invite")
HIGH_IMPACT_VERBS = ("share", "invite")
# Table 9 thresholds are deployment-configurable (App. E "Thresholds"): these are ours.
MIN_DISTINCT_READS = 2    # count_distinct(read resource) >= k before the mutation
MIN_DISTINCT_TOOLS = 2    # "cross-tool": the reads span at least two tools
BASELINE_FRAC = 0.3       # drift: Env_0 from the first 30% of the scope's calls (§5.4)


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
    org_domains: tuple[str, ...] = ()   # the organization's mail domains (reference data)


@dataclass(frozen=True, slots=True)
class Plan:
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
          "SLICE", "UNION")


def polars_nodes(lf: pl.LazyFrame) -> int:
    """Operator nodes in the unoptimized polars plan (joins counted once)."""
    lines = [ln.strip() for ln in lf.explain(optimized=False).splitlines()]
    return sum(1 for ln in lines if ln.startswith(_NODES) and not ln.startswith("END"))


_SENS = pl.col("sensitivity_label").replace_strict(
    {s: i for i, s in enumerate(SENSITIVITY_ORDER)}, default=-1, return_dtype=pl.Int8)


# ------------------------------------------------------------------ baseline steps

def normalize_ops(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.join(s.operations, on="tool_operation", how="left")


def lookup_resources(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.join(s.resources, on="resource_id", how="left")


def unify_identity(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.join(s.directory, on="agent_instance_id", how="left", suffix="_dir").with_columns(
        pl.coalesce("principal_user_id", "principal_user_id_dir").alias("user"))


def trace_units(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """B0's unit: trace id, else session id, else the event alone (§7.2.2)."""
    return lf.with_columns(pl.coalesce(pl.lit("t:") + pl.col("trace_id"),
                                       pl.lit("s:") + pl.col("session_id"),
                                       pl.lit("e:") + pl.col("event_id")).alias("unit"))


def window_units(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """A Delta gap chain per user: a new unit after Delta of the user's silence."""
    gap = pl.col("time").diff().over("user").dt.total_microseconds() > int(s.delta_s * 1e6)
    first = pl.col("user").ne_missing(pl.col("user").shift(1))
    return lf.sort("user", "time", "event_id").with_columns(
        (gap.fill_null(True) | first.fill_null(True)).cum_sum().alias("window")
    ).with_columns(pl.col("window").alias("unit"))


def stitch_context(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.with_columns(pl.coalesce("trace_id", "session_id").alias("ctx"))


def merge_by_context(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Hybrid stitching: windows sharing a trace/session context merge (one pass: each
    context joins its earliest window); events without context keep their window."""
    return lf.with_columns(pl.col("window").min().over("ctx").fill_null(pl.col("window"))
                           .alias("unit"))


def classify_recipients(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Without Tier-2 direction: a recipient outside the organization's domains is external."""
    dom = pl.col("target_principal_id").str.split("@").list.last().str.to_lowercase()
    return lf.with_columns((pl.col("target_principal_id").str.contains("@")
                            & ~dom.is_in(list(s.org_domains))).fill_null(False)
                           .alias("external"))


def seed_unit(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    seed = lf.filter(pl.col("event_id") == s.seed_event).select("unit")
    return lf.join(seed, on="unit", how="semi")


def spawned_instances(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Sub-agents without lineage: the seed unit plus every instance of the same user whose
    first event falls inside the unit's span (+ Delta) joins it (a split/merge guess)."""
    unit = lf.join(lf.filter(pl.col("event_id") == s.seed_event).select("unit"), on="unit",
                   how="semi")
    span = unit.group_by("user").agg(pl.col("time").min().alias("t0"),
                                     pl.col("time").max().alias("t1"))
    first = lf.group_by("agent_instance_id", "user").agg(pl.col("time").min().alias("start"))
    kids = (first.join(span, on="user", how="inner")
            .filter((pl.col("start") >= pl.col("t0"))
                    & (pl.col("start") <= pl.col("t1") + pl.duration(
                        microseconds=int(s.delta_s * 1e6))))
            .select("agent_instance_id"))
    return pl.concat([unit, lf.join(kids, on="agent_instance_id", how="semi")]).unique(
        "event_id", keep="first", maintain_order=True)


# ------------------------------------------------------------------ CIM steps

def delegation_calls(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """One predicate: d's bound tool calls (``delegation_id = d``, ``event_kind = proposal``)."""
    return lf.filter((pl.col("delegation_id") == s.delegation_id)
                     & (pl.col("delegation_binding") == "bound")
                     & (pl.col("event_kind") == "proposal"))


def closure_ids(s: Sources) -> list[str]:
    fam = s.side.filter(pl.col("root_delegation_id") == s.root_id).collect()
    return Lineage.from_frame(fam).closure(s.delegation_id)


def in_closure(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """{d} ∪ Descendants(d) from the side table's lineage edges (§5.3), bound rows only; the
    id range lets row-group statistics prune (store.py)."""
    ids = closure_ids(s)
    return lf.filter(pl.col("delegation_id").is_between(pl.lit(min(ids)), pl.lit(max(ids)))
                     & pl.col("delegation_id").is_in(ids)
                     & (pl.col("delegation_binding") == "bound"))


def closure_calls(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return in_closure(lf, s).filter(pl.col("event_kind") == "proposal")


# ------------------------------------------------------------------ shared query steps

def calls_only(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Tool calls: CIM ``proposal`` rows; in the baseline view, the audit rows that name a
    tool operation (requests and executions alike: no record kind to tell them apart)."""
    if "event_kind" in lf.collect_schema().names():
        return lf.filter(pl.col("event_kind") == "proposal")
    return lf.filter(pl.col("tool_operation").is_not_null())


def touch_set(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.group_by("resource_class", "sensitivity_label").agg(
        pl.col("resource_id").drop_nulls().n_unique().alias("n_resources"),
        pl.len().alias("n_events"))


def agents_by_instance(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.group_by("agent_id", "agent_instance_id").agg(
        pl.len().alias("n_events"), _SENS.max().alias("max_sensitivity_rank"),
        pl.col("time").min().alias("first_time")).sort("first_time", "agent_instance_id")


def running_reads(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Per unit, in time order: distinct resources and tools read so far (a running
    count_distinct, App. E's ``count_distinct(.) >= k``)."""
    key = "unit" if "unit" in lf.collect_schema().names() else "delegation_id"
    is_read = pl.col("action_semantic").is_in(READ_VERBS)
    new_res = is_read & pl.col("resource_id").is_not_null() \
        & pl.struct(key, "resource_id", is_read.alias("_r")).is_first_distinct()
    new_tool = is_read & pl.struct(key, "tool_name", is_read.alias("_r")).is_first_distinct()
    return lf.sort(key, "time", "event_id").with_columns(
        new_res.cast(pl.Int32).cum_sum().over(key).alias("reads_before"),
        new_tool.cast(pl.Int32).cum_sum().over(key).alias("read_tools_before"))


def sequence_hits(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    return lf.filter(pl.col("action_semantic").is_in(MUTATING_VERBS)
                     & (pl.col("reads_before") >= MIN_DISTINCT_READS)
                     & (pl.col("read_tools_before") >= MIN_DISTINCT_TOOLS)).select(
        "event_id", "time", "tool_name", "action_semantic", "resource_id", "reads_before",
        "read_tools_before")


def envelope(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Env(d): tuples (tool class, Tier-1 action, resource class, sensitivity) with the
    time they first occur, the call rank at which they do (§5.4), and whether a call of the
    tuple went outside (Tier-2 ``direction``, or the baseline's recipient classification)."""
    ext = pl.col("external") if "external" in lf.collect_schema().names() \
        else (pl.col("direction") == "external")
    ranked = lf.sort("time", "event_id").with_row_index("_k").with_columns(
        (pl.len() * BASELINE_FRAC).ceil().alias("_n0"), ext.fill_null(False).alias("_ext"))
    return ranked.group_by("tool_name", "action_semantic", "resource_class",
                           "sensitivity_label").agg(
        pl.col("time").min().alias("first_seen"), pl.col("_k").min().alias("first_k"),
        pl.col("_n0").first().alias("n0"), pl.col("_ext").any().alias("external"))


def late_high_impact(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """Expansions after Env_0 that disseminate a confidential+ resource outside the
    organization (the §5.4 detector's high-impact rule, drift.py)."""
    return lf.filter((pl.col("first_k") >= pl.col("n0")) & pl.col("external")
                     & pl.col("action_semantic").is_in(HIGH_IMPACT_VERBS)
                     & (SENSITIVITY_ORDER.index("confidential") <= _SENS))


def unapproved(lf: pl.LazyFrame, s: Sources) -> pl.LazyFrame:
    """No authority expansion (``approval`` row) in the lineage (ancestors, d, descendants)
    at or after the envelope change (§5.4 detector sketch (ii))."""
    fam = s.side.filter(pl.col("root_delegation_id") == s.root_id).collect()
    lin = Lineage.from_frame(fam)
    ids = [*lin.ancestors(s.delegation_id), *lin.closure(s.delegation_id)]
    last = (s.events.filter(pl.col("delegation_id").is_in(ids)
                            & (pl.col("event_kind") == "approval"))
            .select(pl.col("time").max().alias("last_approval")))
    return lf.join(last, how="cross").filter(
        pl.col("last_approval").is_null() | (pl.col("last_approval") < pl.col("first_seen")))


# ------------------------------------------------------------------ sources

def sources(store: Store, delegation_id: str, delta_s: float = 30.0) -> Sources:
    """Baseline sources for one delegation: the baseline view of the file holding it and
    reference tables built from that file (outside any timing: they are maintained data)."""
    row = store.delegation(delegation_id)
    full = store.scan([row["file"]])
    seed = (full.filter((pl.col("delegation_id") == delegation_id)
                        & (pl.col("event_kind") == "proposal"))
            .sort("time", "event_id").select("event_id").head(1).collect())
    if seed.height == 0:
        seed = full.filter(pl.col("delegation_id") == delegation_id).sort("time").select(
            "event_id").head(1).collect()
    ops = full.select("tool_operation", "action_semantic").drop_nulls("tool_operation") \
        .unique("tool_operation").collect().lazy()
    res = full.select("resource_id", "resource_class", "sensitivity_label").drop_nulls(
        "resource_id").unique("resource_id").collect().lazy()
    dirs = full.select("agent_instance_id", "principal_user_id").drop_nulls().unique(
        "agent_instance_id").collect().lazy()
    org = (full.filter((pl.col("direction") == "internal")
                       & pl.col("target_principal_id").str.contains("@"))
           .select(pl.col("target_principal_id").str.split(",").explode().str.split("@")
                   .list.last().str.to_lowercase().unique().sort())
           .collect().to_series().to_list())
    return Sources(full.select(BASELINE_FIELDS), ops, res, dirs, store.delegations(),
                   delegation_id, row["root_delegation_id"],
                   seed.item() if seed.height else "", delta_s, tuple(org))


def cim_sources(src: Sources, store: Store) -> Sources:
    """The same query input with the full CIM rows as the event view."""
    row = store.delegation(src.delegation_id)
    return replace(src, events=store.scan([row["file"]]))


def explain(plan: Plan) -> list[dict[str, Any]]:
    return [{"category": op.category, "step": op.note} for op in plan.ops]
