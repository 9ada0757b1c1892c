"""Authority–causality divergence (paper 002 §5.2, Table 3, §7.2.4 Comp(d)).

``C(e)`` is the causal connected component of event e in G_exec. Spans of one trace form a
tree under their root, so the component of a traced event is its ``trace_id``; an event
without trace context carries no causal information and is counted apart (``n_untraced``)
rather than as a component of its own, so missing telemetry is not mistaken for divergence.

* ``Comp(d) = {C(e) | (d, e) ∈ R_auth}``; d diverges when ``|Comp(d)| > 1``.
* dually, a component diverges when it holds events of several delegations.
* ``comp_closure`` counts components over the lineage closure of a root: a sub-agent in a
  separate runtime splits the family across traces even when each delegation has one (§5.3).
* the issuance predicate of §5.2: events of d outside the trace of ``issue(d)`` (its
  minting row), i.e. condition (i) ``trace_id != trace_id(issue(d))`` or no trace at all.
"""

from __future__ import annotations

import polars as pl

from containmentbench.cim.queries import BOUND, Result
from containmentbench.cim.store import Store


def _q(col: str, q: float) -> pl.Expr:
    return pl.col(col).quantile(q, "nearest")


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
