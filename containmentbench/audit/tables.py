"""Audit tables: the logged-vs-audited gap per stage and defense, the audit's cost per
execution unit (paper 001 §5.5), and the detector scores (P/R/F1 overall, per family and per
evidence tier: paper 001 Tables 3, 5 and 10)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.writers import Table, write

SIM_NOTE = (" Simulated agent (sim backend): these figures validate the harness, not any "
            "model.")


def gap_rows(rollouts: Sequence[Mapping[str, Any]], sinks: Sequence[Mapping[str, Any]],
             replays: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per rollout: sinks the audit attributes to untrusted sources that carry no logged taint
    (audited_not_logged) and logged-tainted sinks the audit does not attribute
    (logged_not_audited); unattributed sinks split by why: no untrusted lineage reached them,
    probed and no cause found, or not probed (explicit evidence found nothing and the backend
    could not replay: not a "no cause")."""
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for s in sinks:
        by[s["rollout_id"]].append(s)
    out = []
    for r in rollouts:
        ss = by.get(r["rollout_id"], [])
        out.append({"rollout_id": r["rollout_id"], "stage": r["stage"],
                    "defense": r["defense"], "model": r["model"], "seed": r["seed"],
                    "sinks": len(ss), "audited": sum(s["audited"] for s in ss),
                    "logged": sum(s["logged_node"] for s in ss),
                    "audited_not_logged": sum(s["audited"] and not s["logged_node"]
                                              for s in ss),
                    "logged_not_audited": sum(s["logged_node"] and not s["audited"]
                                              for s in ss),
                    "not_probed": sum(s.get("causal") == "not_probed" for s in ss),
                    "probed_no_cause": sum(s.get("causal") == "probed_no_cause" for s in ss),
                    "no_lineage": sum(s.get("causal") == "no_lineage" for s in ss),
                    "fides": sum(s["fides"] for s in ss),
                    "fides_conf": sum(bool(s.get("fides_conf")) for s in ss),
                    "replays": int(replays.get(r["rollout_id"], 0))})
    return out


def gap_table(rollouts: Sequence[Mapping[str, Any]], sinks: Sequence[Mapping[str, Any]],
              out_dir: Path, simulated: bool,
              origin: Mapping[str, object] | None = None) -> list[Path]:
    """``origin``: the leading CSV columns (study, model, backend, sim_agent)."""
    if not rollouts:
        return []
    f = pl.DataFrame(list(rollouts))
    s = pl.DataFrame(list(sinks), schema_overrides={"sources": pl.List(pl.String)}) \
        if sinks else None
    agg = f.group_by(["stage", "defense"]).agg(
        pl.len().alias("rollouts"), pl.col("sinks").sum(), pl.col("logged").sum(),
        pl.col("audited").sum(), pl.col("audited_not_logged").sum(),
        pl.col("logged_not_audited").sum(), pl.col("not_probed").sum(),
        pl.col("probed_no_cause").sum(), pl.col("no_lineage").sum(),
        pl.col("fides").sum().alias("fides_flagged"),
        pl.col("fides_conf").sum().alias("fides_conf_flagged"),
        (pl.col("audited_not_logged") + pl.col("logged_not_audited") > 0).sum()
        .alias("rollouts_with_gap"), pl.col("replays").sum())
    if s is not None and s.height:
        cls = s.filter(pl.col("audited")).group_by(["stage", "defense"]).agg(
            *(pl.col("flow_class").eq(c).sum().alias(c)
              for c in ("explicit", "implicit", "asynchronous")),
            pl.col("logged_field").sum().alias("logged_field"))
        agg = agg.join(cls, on=["stage", "defense"], how="left").fill_null(0)
    agg = agg.sort(["stage", "defense"])
    model = ", ".join(sorted(set(f["model"].to_list())))
    cap = (f"Logged vs audited taint per stage and defense ({model}): sinks with logged taint "
           "(commit label set), sinks the provenance audit attributes to an untrusted source, "
           "and the two disagreements (the audit's graph is rebuilt from what each agent saw, "
           "not from the logged labels); unattributed sinks by why (no untrusted lineage, "
           "probed and no cause, not probed); audited sinks split by flow class (paper 001 "
           "§3.3); FIDES-style IFC flags on the same sinks (P-T: propagation; P-F: "
           "confidential data to an external recipient); counterfactual replays run."
           + (SIM_NOTE if simulated else ""))
    return write(Table("audit_gap", cap, agg), out_dir, origin=origin)


def prf(tp: int, fp: int, fn: int) -> tuple[float | None, float | None, float | None]:
    """Precision, recall, F1; None where undefined (no predicted or no actual positives)."""
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f1 = 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else \
        (0.0 if p is not None and r is not None else None)
    return p, r, f1


def score_rows(labels: Sequence[Mapping[str, Any]], key: str | None
               ) -> list[dict[str, Any]]:
    """Confusion counts and P/R/F1 per group of ``key`` (None: overall) for each detector.
    ``labels`` rows: family, tier, positive, neurotaint, fides and (optional) fides_pt (the
    FIDES-style P-T check without its declassification rule)."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in labels:
        groups["overall" if key is None else str(r[key])].append(r)
    out = []
    for g in sorted(groups):
        rows = groups[g]
        rec: dict[str, Any] = {"group": g, "scenarios": len(rows),
                               "positives": sum(r["positive"] for r in rows)}
        for det in ("neurotaint", "fides", "fides_pt"):
            if det not in rows[0]:
                continue
            tp = sum(r["positive"] and r[det] for r in rows)
            fp = sum((not r["positive"]) and r[det] for r in rows)
            fn = sum(r["positive"] and not r[det] for r in rows)
            tn = len(rows) - tp - fp - fn
            p, rc, f1 = prf(tp, fp, fn)
            rec.update({f"{det}_tp": tp, f"{det}_fp": fp, f"{det}_fn": fn, f"{det}_tn": tn,
                        f"{det}_p": p, f"{det}_r": rc, f"{det}_f1": f1})
        out.append(rec)
    return out


def overhead_table(cost: Mapping[str, Any], out_dir: Path, simulated: bool,
                   origin: Mapping[str, object] | None = None) -> list[Path]:
    """The audit's cost per execution unit (one rollout; paper 001 §5.5 reports 0.25 s per
    unit and 457 judge tokens per causal query): one row per part of the audit, with the
    counts that explain it. Wall-clock: frozen, never compared by ``reproduce``."""
    units = max(int(cost["units"]), 1)
    parts = (("DCPG (graph from what each agent saw)", "dcpg", cost["units"]),
             ("Tiers 1-2 (canary, LCS)", "tier12", cost["pairs"]),
             ("Tiers 3-4 (MiniLM, chunks)", "tier34", cost["pairs_embedded"]),
             ("Causal analyzer (replays, judge)", "causal",
              cost["replays"] + cost["judge_calls"]))
    rows: list[dict[str, Any]] = [
        {"part": name, "ms_per_unit": round(cost[f"{k}_ms_per_unit"], 3),
         "ms_total": round(cost[f"{k}_ms_per_unit"] * units, 1), "work": int(n),
         "work_per_unit": round(n / units, 3)} for name, k, n in parts]
    total = sum(cost[f"{k}_ms_per_unit"] for _, k, _ in parts)
    rows.append({"part": "total per execution unit", "ms_per_unit": round(total, 3),
                 "ms_total": round(total * units, 1), "work": int(cost["units"]),
                 "work_per_unit": 1.0})
    rows.append({"part": "MiniLM load (once per process, not per unit)", "ms_per_unit": None,
                 "ms_total": round(1000 * cost.get("model_load_s", 0.0), 1), "work": 1,
                 "work_per_unit": None})
    tokens = cost["judge_tokens"] / cost["judge_calls"] if cost["judge_calls"] else None
    cap = (f"Audit cost per execution unit (one rollout; {cost['units']} units, "
           f"{cost['sinks']} sinks, {cost['pairs']} (sink, source) pairs): milliseconds per "
           "unit of each part and the work it did (units, pairs scored, pairs embedded, "
           f"replays + judge calls). {'Every tier and probe run (labelled suite).' if cost['everything'] else 'Cascade with early stop.'} "
           f"Judge: {cost['judge_calls']} calls, "
           + (f"{tokens:.0f} tokens per call" if tokens is not None else "no judge")
           + " (paper 001 §5.5: 0.25 s per unit, 457 judge tokens per query). Wall-clock "
           "times of this machine." + (SIM_NOTE if simulated else ""))
    frame = pl.DataFrame(rows, schema_overrides={"ms_per_unit": pl.Float64,
                                                 "work_per_unit": pl.Float64})
    return write(Table("audit_overhead", cap, frame), out_dir, origin=origin)


def unit_cost_rows(units: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Median, p90 and mean wall time of the audit per rollout and per sink, with the judge
    calls and replays it made (paper 001 §5.5 reports a mean per execution unit only; the
    median and p90 are ours). A rollout's time: its graph and Tiers 1-2, its probes and
    judge calls, and its share of the batched embedding pass (by pairs); a sink's: its
    rollout's time over the rollout's sinks (one value per sink)."""
    import numpy as np

    def stats(xs: Sequence[float]) -> dict[str, float | None]:
        if not xs:
            return {"median": None, "p90": None, "mean": None}
        a = np.asarray(xs, dtype=float)
        return {"median": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
                "mean": float(a.mean())}

    per_sink = [(u["ms"] / u["sinks"], u["judge_calls"] / u["sinks"],
                 u["replays"] / u["sinks"]) for u in units for _ in range(u["sinks"])]
    out = []
    for unit, xs in (("rollout", [(u["ms"], u["judge_calls"], u["replays"]) for u in units]),
                     ("sink", per_sink)):
        ms, jc, rp = (stats([x[i] for x in xs]) for i in range(3))
        out.append({"unit": unit, "n": len(xs),
                    **{f"ms_{k}": None if v is None else round(v, 3) for k, v in ms.items()},
                    "judge_calls": int(sum(u["judge_calls"] for u in units)),
                    **{f"judge_calls_{k}": v for k, v in jc.items() if k != "mean"},
                    **{f"replays_{k}": v for k, v in rp.items() if k != "mean"}})
    return out


def unit_cost_table(units: Sequence[Mapping[str, Any]], out_dir: Path, simulated: bool,
                    origin: Mapping[str, object] | None = None) -> list[Path]:
    """:func:`unit_cost_rows` as a table. Wall-clock: frozen, never compared by
    ``reproduce``."""
    if not units:
        return []
    rows = unit_cost_rows(units)
    cap = ("Audit cost per unit: median, p90 and mean wall time (ms) per rollout and per "
           "sink, judge calls (total, and median and p90 per unit) and counterfactual "
           "replays per unit (paper 001 §5.5: 0.25 s per execution unit on average, 457 "
           "judge tokens per query; the paper is silent on the median and p90). The "
           "batched embedding pass is shared out by pairs; a sink carries its rollout's "
           "time over its sinks. Wall-clock times of this machine."
           + (SIM_NOTE if simulated else ""))
    floats = [k for k in rows[0] if k not in ("unit", "n", "judge_calls")]
    frame = pl.DataFrame(rows, schema_overrides={k: pl.Float64 for k in floats})
    return write(Table("audit_unit_cost", cap, frame), out_dir, origin=origin)
