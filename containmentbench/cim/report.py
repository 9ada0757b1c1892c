"""``cim report``: tables in the shape of paper 002 Tables 5, 6 and 7, computed from a store.

* Table 5: per workflow and method, Amb median (p95), Rec median (p05), and Comp(d) median
  (p95) with the share of delegations where Comp(d) > 1 (reconstruct.py; windowed methods
  at their best Delta). Generated stores also record the Table 4 parameter values.
* Table 6: bytes/event of the baseline vs CIM field sets (Parquet as stored, compact JSON as
  in the paper) and, with ``latency``, the gateway's added time per call (overhead.py).
* Table 7: operations per query class in each baseline plan vs the CIM plan, counted from
  the plan objects of plans.py, and the polars logical-plan nodes they build.
* The §5.4 drift detector against the generator's injected drift (when recorded).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from containmentbench.cim.divergence import divergence
from containmentbench.cim.drift import drift
from containmentbench.cim.overhead import bytes_per_event
from containmentbench.cim.plans import effort
from containmentbench.cim.reconstruct import DELTAS_S, reconstruct_store, summarize
from containmentbench.cim.schema import CIM_EVENTS
from containmentbench.cim.store import Store, partition_of
from containmentbench.escape import md_cell

PAPER_P95_US = 290.0
PAPER_BYTES = (341.0, 588.0)


def _num(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float):
        if x >= 1e6:
            return f"{x:.3g}"
        return f"{x:.0f}" if x == int(x) and x >= 10 else f"{x:.2f}"
    return str(x)


def _amb(x: float) -> str:
    return f"{x:,.0f}" if x < 1e12 else f"{x:.3g}"


def _md(header: list[str], rows: list[list[Any]]) -> str:
    # workflow names and ids come from the store: escaped like every Markdown cell
    out = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_cell(_num(c)) for c in r) + " |" for r in rows]
    return "\n".join(out)


def table5(summary: pl.DataFrame) -> str:
    methods = ["B0", "B1", "B2", "CIM", "CIM-closure"]
    blocks = []
    for title, a, b, fmt in (("Ambiguity Amb, median (p95)", "amb_median", "amb_p95", _amb),
                             ("Delegation recall Rec, median (p05)", "rec_median", "rec_p05",
                              lambda x: f"{x:.2f}")):
        rows = []
        for wf in summary["workflow"].unique().sort().to_list():
            row: list[Any] = [wf]
            for m in methods:
                r = summary.filter((pl.col("workflow") == wf) & (pl.col("method") == m))
                row.append(f"{fmt(r[a][0])} ({fmt(r[b][0])})" if r.height else "-")
            rows.append(row)
        blocks.append(f"**{title}**\n\n" + _md(["Workflow", *methods], rows))
    rows = []
    cim = summary.filter(pl.col("method") == "CIM").sort("workflow")
    for r in cim.iter_rows(named=True):
        rows.append([r["workflow"], f"{r['comp_median']:.0f} ({r['comp_p95']:.0f})",
                     f"{r['comp_gt1']:.2f}", r["n_delegations"]])
    blocks.append("**Authority–causality divergence Comp(d), median (p95)**\n\n" + _md(
        ["Workflow", "Comp(d)", "share Comp(d)>1", "delegations"], rows))
    deltas = summary.filter(pl.col("delta_s").is_not_null()).sort("workflow", "method")
    rows = [[r["workflow"], r["method"], f"{r['delta_s']:.0f} s"]
            for r in deltas.iter_rows(named=True)]
    blocks.append("Best Delta per workflow (highest mean f1 of the reconstructed unit):\n\n"
                  + _md(["Workflow", "Method", "Delta"], rows))
    return "\n\n".join(blocks)


def _sample(store: Store, rows: int = 200_000) -> pa.Table:
    parts, n = [], 0
    for f in store.files:
        t = pq.read_table(store.root / f, columns=CIM_EVENTS.names)
        parts.append(t)
        n += t.num_rows
        if n >= rows:
            break
    return pa.concat_tables(parts).slice(0, rows)


def table6(store: Store, latency: bool = True) -> tuple[str, dict[str, Any]]:
    """Bytes/event measured here; gateway latency as recorded in the store's manifest by
    the micro-deployment (bench/cim_micro.py), which timed every call of a real run."""
    b = bytes_per_event(_sample(store))
    rows = [["Bytes/event (Parquet, zstd)", b["parquet_baseline"], b["parquet_cim"],
             f"+{b['parquet_delta']:.1f}", "-"],
            ["Bytes/event (compact JSON)", b["json_baseline"], b["json_cim"],
             f"+{b['json_delta']:.1f}", "341 / 588 (+247)"]]
    info: dict[str, Any] = {"bytes": b}
    lat = store.manifest.get("latency") if latency else None
    if lat and lat.get("n_calls"):
        info["latency"] = lat
        p95 = lat["gateway_p95_us"]
        rows += [["Gateway latency p50 (us)", "-", lat["gateway_p50_us"],
                  f"+{lat['gateway_p50_us']:.2f}", "+10 us"],
                 ["Gateway latency p95 (us)", "-", p95, f"+{p95:.2f}",
                  f"+{PAPER_P95_US:.0f} us ({p95 / PAPER_P95_US:.2f}x)"]]
    return _md(["Metric", "Baseline", "CIM", "Delta", "Paper"], rows), info


def _effort_delegation(store: Store) -> str:
    side = store.delegations()
    fam = (side.group_by("root_delegation_id").agg(pl.len().alias("k"),
                                                   pl.col("n_events").sum().alias("e"))
           .sort(["k", "e", "root_delegation_id"], descending=[True, True, False])
           .head(1).collect())
    return fam["root_delegation_id"][0]


def table7(store: Store, delegation_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    did = delegation_id or _effort_delegation(store)
    rows = effort(store, did)
    by = {(r["query_class"], r["method"]): r for r in rows}
    out = []
    for qc in dict.fromkeys(r["query_class"] for r in rows):
        b, c = by[(qc, "baseline")], by[(qc, "CIM")]
        out.append([qc.replace("_", " "), b["n_ops"], c["n_ops"], b["polars_nodes"],
                    c["polars_nodes"]])
    text = _md(["Query class", "Baseline ops", "CIM ops", "Baseline polars nodes",
                "CIM polars nodes"], out)
    return text + f"\n\n(plans built for delegation `{did}`)", rows


def drift_check(store: Store) -> str | None:
    side = store.delegations().filter(pl.col("gt_drift").is_not_null())
    if side.select(pl.len()).collect().item() == 0:
        return None
    files = []
    for f in store.files:  # first file per workflow keeps this bounded at scale
        if partition_of(f).get("workflow") not in {partition_of(x).get("workflow")
                                                   for x in files}:
            files.append(f)
    res = drift(store, files=files).table
    gt = side.select("delegation_id", "gt_drift", "gt_approved").collect()
    j = res.join(gt, on="delegation_id", how="inner")
    want = j.filter(pl.col("gt_drift") & ~pl.col("gt_approved"))
    appr = j.filter(pl.col("gt_drift") & pl.col("gt_approved"))
    rest = j.filter(~pl.col("gt_drift"))
    rows = [["injected, not approved", want.height, want["flagged"].mean()],
            ["injected, approved after", appr.height, appr["flagged"].mean()],
            ["not injected", rest.height, rest["flagged"].mean()]]
    return _md(["Delegation families (roots)", "n", "share flagged"], rows)


def report(store: Store, *, latency: bool = False, deltas: tuple[float, ...] = DELTAS_S,
           max_buckets: int | None = 2, effort_delegation: str | None = None
           ) -> tuple[str, dict[str, Any]]:
    per, runs = reconstruct_store(store, deltas, max_buckets)
    summ = summarize(per, ["workflow"])
    t6, info6 = table6(store, latency)
    t7, rows7 = table7(store, effort_delegation)
    div = divergence(store, files=list(runs["file"]))
    params = store.manifest.get("params")
    parts = [f"# CIM report: {store.root}", ""]
    if params:
        keep = ("users", "agents", "tools_min", "tools_max", "files", "repos", "channels",
                "delegations_per_day", "events_min", "events_max", "loops_w1", "loops_w2",
                "loops_w3", "overlap_rate", "spawn_fanout", "spawn_depth", "retry_rate",
                "coverage", "bypass", "trace_coverage_min", "trace_coverage_max", "seed")
        parts += ["Generator parameters (Table 4): " + ", ".join(
            f"{k}={params[k]}" for k in keep), ""]
    ev = int(runs["n_evaluated"].sum())
    parts += [f"Evaluated {ev:,} covered, bound events of {int(runs['n_events'].sum()):,} in "
              f"{runs.height} runs; uncovered {int(runs['n_uncovered'].sum()):,}, unbound "
              f"{int(runs['n_unbound'].sum()):,} (counted, not attributed).", "",
              "## Table 5 shape: reconstruction under overlap and fragmentation", "",
              table5(summ), "",
              f"Components holding several delegations: {div.info['n_components_multi_delegation']}"
              f" of {div.info['n_components']}; families spanning several traces: "
              f"{div.info['frac_family_comp_gt1']:.2f}.", "",
              "## Table 6 shape: operational overhead", "", t6, "",
              "## Table 7 shape: query construction effort", "", t7, ""]
    dc = drift_check(store)
    if dc:
        parts += ["## Drift detector (§5.4) against injected drift", "", dc, ""]
    return "\n".join(parts), {"summary": summ, "runs": runs, "table6": info6, "table7": rows7}
