"""Authority–causality divergence (paper 002 §5.2, Table 3, §7.2.4 Comp(d)).

``C(e)`` is the causal connected component of event e in G_exec. Spans of one trace form a
tree under their root, so the component of a traced event is its ``trace_id``; an event
without trace context carries no causal information and is counted apart (``n_untraced``)
rather than as a component of its own, so missing telemetry is not mistaken for divergence.

* ``Comp(d) = {C(e) | (d, e) ∈ R_auth}``; d diverges when ``|Comp(d)| > 1``.
* dually, a component diverges when it holds events of several delegations.
* ``comp_closure`` counts components over the lineage closure of a root: a sub-agent in a
  separate runtime splits the family across traces even when each delegation has one (§5.3).
* the issuance predicates of §5.2 over events of d: (i) ``trace_id != trace_id(issue(d))``
  (or no trace at all) — ``n_outside_issue_trace``; (ii) no ancestor relationship to the
  issuance span — the event's span is neither ``issue(d)``'s span nor below it following
  ``parent_span_id`` — ``n_not_descended``. (ii) is stricter than (i): an event can sit in
  the issuance trace yet on a branch the issuance did not cause (a sibling delegation's
  span tree, a propagated parent context).
"""

from __future__ import annotations

import polars as pl

from containmentbench.cim.queries import BOUND, Result
from containmentbench.cim.store import Store


def _q(col: str, q: float) -> pl.Expr:
    return pl.col(col).quantile(q, "nearest")


def _not_descended(scan: pl.LazyFrame) -> pl.DataFrame:
    """Per delegation, events whose span does not descend from its issuance span (ii)."""
    rows = scan.select("delegation_id", "event_kind", "span_id", "parent_span_id",
                       "trace_id").collect()
    parent: dict[str, str | None] = {}
    for s, p in zip(rows["span_id"].to_list(), rows["parent_span_id"].to_list()):
        if s is not None and (p is not None or s not in parent):
            parent[s] = p
    issue = {d: s for d, k, s in zip(rows["delegation_id"], rows["event_kind"], rows["span_id"])
             if k == "delegate" and s is not None}
    out: dict[str, int] = {}
    for d, s in zip(rows["delegation_id"].to_list(), rows["span_id"].to_list()):
        root, x, hops = issue.get(d), s, 0
        while x is not None and x != root and hops <= len(parent):
            x, hops = parent.get(x), hops + 1
        out[d] = out.get(d, 0) + (root is None or x != root)
    return pl.DataFrame({"delegation_id": list(out), "n_not_descended": list(out.values())},
                        schema={"delegation_id": pl.String, "n_not_descended": pl.Int64})


def divergence(store: Store, files: list[str] | None = None,
               delegation_id: str | None = None) -> Result:
    scan = store.scan(files).filter(BOUND)
    if delegation_id is not None:
        scan = scan.filter(pl.col("delegation_id") == delegation_id)
    issue = (scan.filter(pl.col("event_kind") == "delegate")
             .group_by("delegation_id").agg(pl.col("trace_id").first().alias("issue_trace")))
    per_d = (scan.join(issue, on="delegation_id", how="left")
             .group_by("delegation_id")
             .agg(pl.len().alias("n_events"),
                  pl.col("trace_id").is_null().sum().alias("n_untraced"),
                  pl.col("trace_id").drop_nulls().n_unique().alias("comp"),
                  (pl.col("trace_id").is_null()
                   | (pl.col("trace_id") != pl.col("issue_trace")).fill_null(True))
                  .sum().alias("n_outside_issue_trace"))
             .sort("delegation_id").collect())
    side = store.delegations().select("delegation_id", "root_delegation_id")
    fam = (scan.join(side, on="delegation_id", how="left")
           .group_by("root_delegation_id")
           .agg(pl.col("delegation_id").n_unique().alias("n_delegations"),
                pl.col("trace_id").drop_nulls().n_unique().alias("comp_closure"))
           .collect())
    comps = (scan.filter(pl.col("trace_id").is_not_null()).group_by("trace_id")
             .agg(pl.len().alias("n_events"),
                  pl.col("delegation_id").n_unique().alias("n_delegations"))
             .collect())
    per_d = per_d.join(_not_descended(scan), on="delegation_id", how="left").with_columns(
        pl.col("n_not_descended").fill_null(pl.col("n_events")))
    s = per_d.select(pl.len().alias("n"), pl.col("comp").median().alias("med"),
                     _q("comp", 0.95).alias("p95"), (pl.col("comp") > 1).mean().alias("frac"))
    n, med, p95, frac = s.row(0)
    info = {
        "n_delegations": n, "comp_median": med, "comp_p95": p95, "frac_comp_gt1": frac,
        "n_families": fam.height,
        "frac_family_comp_gt1": fam.select((pl.col("comp_closure") > 1).mean()).item(),
        "n_components": comps.height,
        "n_components_multi_delegation": comps.filter(pl.col("n_delegations") > 1).height,
        "frac_components_multi_delegation":
            comps.select((pl.col("n_delegations") > 1).mean()).item(),
        "families": fam, "components": comps}
    return Result(per_d, info)
