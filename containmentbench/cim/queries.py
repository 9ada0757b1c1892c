"""Delegation-scoped forensic queries over a CIM store (paper 002 §4.2.1, §5, Table 2).

Each query is a function over Parquet with polars lazy scans. A delegation scope is
resolved once from the side table (``scope``): the family of the delegation's root, its
lineage closure ``{d} ∪ Descendants(d)`` (§5.3, I3) and the files holding those rows; the
event scan then carries an id-range predicate that row-group statistics prune (store.py).

Only ``bound`` rows are attributed to a delegation: the id on an ``unbound`` row is a claim
the gateway could not validate (§6 (d), I5). Unbound rows are never dropped: every result
carries ``n_unbound_claims`` and ``misbinding`` lists them.

* Q1 ``blast_radius``: resource touch set by resource_class x sensitivity_label (§5.1, §5.5).
* Q2 ``agent_attribution``: agents and instances under d, primary vs sub-agent (§5.5).
* Q3 ``externalization``: share with direction=external and its upstream reads, across
  delegation boundaries by trace and by lineage ancestry (§5.5, ancestry.py).
* ``lineage``: ancestors and descendants (§5.3).
* ``divergence`` lives in divergence.py, ``drift`` in drift.py, ``misbinding`` here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from containmentbench.cim.ancestry import SpanForest, by_delegation, upstream_of
from containmentbench.cim.lineage import Lineage
from containmentbench.cim.schema import SENSITIVITY_ORDER
from containmentbench.cim.store import Store

_SENS_RANK = pl.col("sensitivity_label").replace_strict(
    {s: i for i, s in enumerate(SENSITIVITY_ORDER)}, default=-1, return_dtype=pl.Int8)
BOUND = pl.col("delegation_binding") == "bound"


@dataclass(slots=True)
class Result:
    """A query's table plus scalar facts (scope, unbound claims) shown beside it."""

    table: pl.DataFrame
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Scope:
    delegation_id: str
    root: str
    lineage: Lineage
    ids: tuple[str, ...]          # d, or its closure
    family: tuple[str, ...]       # every delegation of the root's family
    files: tuple[str, ...]
    depth: dict[str, int]


def scope(store: Store, delegation_id: str, include_descendants: bool = True) -> Scope:
    row = store.delegation(delegation_id)
    fam = store.family(row["root_delegation_id"])
    lin = Lineage.from_frame(fam)
    ids = lin.closure(delegation_id) if include_descendants else [delegation_id]
    files = sorted(set(fam.filter(pl.col("delegation_id").is_in(ids))["file"].to_list()))
    return Scope(delegation_id, row["root_delegation_id"], lin, tuple(ids),
                 tuple(fam["delegation_id"].to_list()), tuple(files),
                 lin.depth_below(delegation_id))


def _scoped(store: Store, sc: Scope) -> tuple[pl.LazyFrame, int]:
    """Bound rows of the scope, and the number of unbound rows claiming it."""
    rows = store.rows(sc.ids, sc.files)
    unbound = rows.filter(~BOUND).select(pl.len()).collect().item()
    return rows.filter(BOUND), unbound


def _info(sc: Scope, unbound: int) -> dict[str, Any]:
    return {"delegation_id": sc.delegation_id, "root_delegation_id": sc.root,
            "closure": list(sc.ids), "n_unbound_claims": unbound}


def blast_radius(store: Store, delegation_id: str, include_descendants: bool = True) -> Result:
    """Q1: distinct resources touched under d (and descendants), by class and label."""
    sc = scope(store, delegation_id, include_descendants)
    rows, unbound = _scoped(store, sc)
    table = (rows.filter(pl.col("event_kind").is_in(["proposal", "commit"]))
             .group_by("resource_class", "sensitivity_label")
             .agg((pl.col("event_kind") == "proposal").sum().alias("n_calls"),
                  (pl.col("event_kind") == "commit").sum().alias("n_commits"),
                  pl.col("resource_id").drop_nulls().n_unique().alias("n_resources"),
                  pl.col("action_semantic").unique().sort().alias("verbs"),
                  pl.col("delegation_id").n_unique().alias("n_delegations"),
                  pl.col("resource_id").drop_nulls().unique().sort().alias("resources"))
             .with_columns(_SENS_RANK.alias("_rank"))
             .sort(["_rank", "resource_class"], descending=[True, False], nulls_last=True)
             .drop("_rank").collect())
    return Result(table, _info(sc, unbound))


def agent_attribution(store: Store, delegation_id: str) -> Result:
    """Q2: which agents and instances acted under d; primary (d itself) vs sub-agent."""
    sc = scope(store, delegation_id)
    rows, unbound = _scoped(store, sc)
    depth = pl.DataFrame({"delegation_id": list(sc.depth),
                          "lineage_depth": list(sc.depth.values())},
                         schema={"delegation_id": pl.String, "lineage_depth": pl.Int32})
    table = (rows.group_by("agent_id", "agent_instance_id", "delegation_id")
             .agg(pl.len().alias("n_events"),
                  (pl.col("event_kind") == "proposal").sum().alias("n_calls"),
                  pl.col("action_semantic").filter(pl.col("event_kind") == "proposal")
                  .unique().sort().alias("verbs"),
                  pl.col("tool_name").filter(pl.col("event_kind") == "proposal")
                  .unique().sort().alias("tools"),
                  pl.col("time").min().alias("first_time"),
                  pl.col("time").max().alias("last_time"))
             .join(depth.lazy(), on="delegation_id", how="left")
             .with_columns(pl.when(pl.col("delegation_id") == delegation_id)
                           .then(pl.lit("primary")).otherwise(pl.lit("sub-agent"))
                           .alias("role"))
             .sort(["lineage_depth", "first_time", "agent_instance_id"]).collect())
    return Result(table, _info(sc, unbound))


def externalization(store: Store, delegation_id: str) -> Result:
    """Q3: shares with direction=external under d, each with its upstream reads.

    Upstream comes from trace ancestry (span tree, happened-before, across sub-agents in one
    trace) and from lineage ancestry (reads of ancestor delegations before they minted the
    next one on the path), cim/ancestry.py; both need only the family's bound rows."""
    sc = scope(store, delegation_id)
    fam = (store.rows(sc.family, sc.files).filter(BOUND).collect()
           .with_row_index("_pos").with_columns(pl.col("_pos").cast(pl.Int64)))
    scoped = fam.filter(pl.col("delegation_id").is_in(list(sc.ids)))
    unbound = store.rows(sc.ids, sc.files).filter(~BOUND).select(pl.len()).collect().item()
    ext = scoped.filter((pl.col("event_kind") == "proposal")
                        & (pl.col("action_semantic") == "share")
                        & (pl.col("direction") == "external")).sort("time", "_pos")
    commits = set(scoped.filter(pl.col("event_kind") == "commit")["call_id"].drop_nulls())
    forest = SpanForest(fam.filter(pl.col("trace_id").is_in(ext["trace_id"].drop_nulls()
                                                            .unique().to_list())))
    by_d = by_delegation(fam)
    parent = dict(sc.lineage.parent)
    minted = {r["delegation_id"]: (r["time"], r["_pos"]) for r in
              fam.filter(pl.col("event_kind") == "delegate").iter_rows(named=True)}
    rows_by_id = {r["event_id"]: r for r in fam.iter_rows(named=True)}
    out = []
    for r in ext.iter_rows(named=True):
        up = upstream_of(r, forest, by_d, parent, minted)
        reads = [rows_by_id[e] for e in dict.fromkeys(up.trace_reads + up.lineage_reads)]
        ranks = [SENSITIVITY_ORDER.index(a["sensitivity_label"]) for a in reads
                 if a["sensitivity_label"] in SENSITIVITY_ORDER]
        out.append({
            "event_id": r["event_id"], "time": r["time"], "delegation_id": r["delegation_id"],
            "agent_instance_id": r["agent_instance_id"], "tool_name": r["tool_name"],
            "tool_operation": r["tool_operation"], "resource_id": r["resource_id"],
            "sensitivity_label": r["sensitivity_label"],
            "target_principal_id": r["target_principal_id"],
            "executed": r["call_id"] in commits or r["action_outcome"] == "success",
            "causal_context": r["trace_id"] is not None,
            "n_ancestors": len(up.trace_events),
            "ancestor_event_ids": list(up.trace_events),
            "trace_reads": [rows_by_id[e]["resource_id"] for e in up.trace_reads],
            "lineage_reads": [rows_by_id[e]["resource_id"] for e in up.lineage_reads],
            "ancestor_read_events": [a["event_id"] for a in reads],
            "ancestor_reads": list(dict.fromkeys(a["resource_id"] for a in reads
                                                 if a["resource_id"])),
            "upstream_delegations": sorted({a["delegation_id"] for a in reads}),
            "max_ancestor_sensitivity": SENSITIVITY_ORDER[max(ranks)] if ranks else None})
    ls = pl.List(pl.String)
    schema = {"event_id": pl.String, "time": pl.Datetime("us", "UTC"),
              "delegation_id": pl.String, "agent_instance_id": pl.String,
              "tool_name": pl.String, "tool_operation": pl.String, "resource_id": pl.String,
              "sensitivity_label": pl.String, "target_principal_id": pl.String,
              "executed": pl.Boolean, "causal_context": pl.Boolean, "n_ancestors": pl.Int64,
              "ancestor_event_ids": ls, "trace_reads": ls, "lineage_reads": ls,
              "ancestor_read_events": ls, "ancestor_reads": ls, "upstream_delegations": ls,
              "max_ancestor_sensitivity": pl.String}
    info = _info(sc, unbound)
    info["externalized"] = bool(out)
    return Result(pl.DataFrame(out, schema=schema), info)


def lineage(store: Store, delegation_id: str) -> Result:
    """Ancestors (nearest first), the delegation itself and its descendants (BFS)."""
    sc = scope(store, delegation_id)
    anc = sc.lineage.ancestors(delegation_id)
    rel = [(a, "ancestor", -(i + 1)) for i, a in enumerate(anc)]
    rel += [(d, "self" if d == delegation_id else "descendant", sc.depth[d]) for d in sc.ids]
    order = pl.DataFrame({"delegation_id": [r[0] for r in rel],
                          "relation": [r[1] for r in rel],
                          "distance": [r[2] for r in rel]},
                         schema={"delegation_id": pl.String, "relation": pl.String,
                                 "distance": pl.Int32}).with_row_index("_o")
    side = store.delegations().filter(pl.col("root_delegation_id") == sc.root).collect()
    table = (order.join(side.select("delegation_id", "delegation_parent_id", "agent_id",
                                    "agent_instance_id", "minted_time", "n_events"),
                        on="delegation_id", how="left").sort("_o").drop("_o"))
    info = {"delegation_id": delegation_id, "root_delegation_id": sc.root,
            "n_ancestors": len(anc), "n_descendants": len(sc.ids) - 1}
    return Result(table, info)


def misbinding(store: Store, files: list[str] | None = None) -> Result:
    """Delegation misbinding (Table 3, I5): integrity signals, unbound rows, and bound rows
    whose principal differs from the principal the delegation was minted for. Only rows the
    gateway captured are judged; uncovered rows are counted apart (coverage, App. C.5)."""
    everything = store.scan(files)
    scan = everything.filter(pl.col("covered"))
    side = store.delegations().select("delegation_id",
                                      pl.col("principal_user_id").alias("minted_principal"))
    flagged = (scan.join(side, on="delegation_id", how="left")
               .with_columns(pl.when(BOUND & pl.col("minted_principal").is_not_null()
                                     & (pl.col("principal_user_id")
                                        != pl.col("minted_principal")))
                             .then(pl.lit(["misbinding:principal_mismatch"]))
                             .otherwise(pl.lit([], dtype=pl.List(pl.String)))
                             .alias("_derived"))
               .with_columns(pl.concat_list(pl.col("integrity").fill_null([]),
                                            "_derived").alias("signals"))
               .filter(~BOUND | (pl.col("signals").list.len() > 0)))
    events = (flagged.select("event_id", "time", "event_kind", "delegation_binding",
                             "delegation_id", "principal_user_id", "agent_id",
                             "agent_instance_id", "tool_name", "signals", "agent_hints")
              .sort("time", "event_id").collect())
    summary = (events.explode("signals")
               .group_by("delegation_binding", pl.col("signals").alias("signal"))
               .agg(pl.len().alias("n_events"),
                    pl.col("delegation_id").drop_nulls().n_unique().alias("n_claimed_delegations"))
               .sort("n_events", descending=True))
    totals = everything.select(pl.len().alias("n"), (pl.col("covered") & ~BOUND).sum(),
                               (~pl.col("covered")).sum().alias("c")).collect().row(0)
    info = {"n_events": totals[0], "n_unbound": totals[1], "n_uncovered": totals[2],
            "n_flagged_events": events.height}
    return Result(summary, info | {"events": events})
