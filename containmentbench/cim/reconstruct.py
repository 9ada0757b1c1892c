"""Delegation reconstruction: baselines B0-B2 vs CIM and their metrics (paper 002 §7.2).

Every method maps the evaluated events to *units*, the groups its evidence links. Methods
(§7.2.2), all over the same observed telemetry (E, R_causal, attr):

* ``CIM``: units are ``delegation_id`` groups (bound at capture time, §6).
* ``B0`` trace-only: group by ``trace_id``; without one fall back to ``session_id``, else a
  singleton (§7.2.2; §7.1 "falls back to the coarsest available execution context").
* ``B1`` time-window: "sliding window Delta" (§7.2.2) with no key: the run's events fall
  into consecutive windows of width Delta, each window a unit (a window sliding by its own
  width, so units partition E). Two readings are set aside, with why: a per-user window is
  what B2 adds ("merged by Delta and {user, ...}"), so B1 has no key; and a gap chain
  without a key (a new unit only after Delta of silence in the whole run) never breaks at
  Table 4 rates (hundreds of events per second), so every run would be one unit.
* ``B2`` hybrid, "trace/session grouping merged by Delta and {user, agent instance,
  tool}" (§7.2.2): connected components of B0's trace/session links united with Delta gap
  chains per user, per agent instance and per tool. A busy tool never pauses for Delta, so
  its chain links every delegation that uses it: at Table 4 rates a run collapses into one
  unit, and Amb(d) = the delegations of the run for all d (the paper's B2 column has
  median = p95 in every workflow, the same signature).

Metrics, per ground-truth delegation d with events E*(d) (§7.2.3, §7.2.4):

* **Amb(d)** — the number of delegation groupings of d's events consistent with the method's
  telemetry. A method cannot split its units (its evidence links their events) and has no
  evidence telling apart the delegations active in one unit (Prop. 2.1: event-local
  attributes do not encode membership). So a grouping consistent with the telemetry assigns
  each unit holding events of d to one delegation active in that unit::

      Amb(d) = prod_{K in U(d)} |D(K)|,   U(d) = units with an event of d,
                                           D(K) = delegations with an event in K.

  Amb = 1 iff every unit holding d's events is pure; CIM's units are pure by construction.
  The whole-run ``Amb(E) = prod_K |D(K)|``. Both are kept as log10 (they overflow floats).
* **Rec(d)** = |E*(d) ∩ Ê(d)| / |E*(d)| with Ê(d) the unit holding most of d's events
  (ties: lowest unit id); ``prec`` = |E*(d) ∩ Ê(d)| / |Ê(d)|, the precision of that unit
  (over-grouping shows here, not in recall); ``f1`` of the two selects the best Delta.
* ``n_cand`` = |D(Ê(d))|, the delegations sharing d's reconstructed unit: how many
  candidates an analyst must tell apart for d's main unit (a second reading of per-delegation
  ambiguity, reported beside Amb(d)).
* **Comp(d)**: distinct traces among d's traced events (method independent, divergence.py).

The evaluated events are the covered, bound ones (``covered`` and ``delegation_binding ==
bound``), identical for all methods; unbound and uncovered counts are reported beside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

DELTAS_S = (5, 30, 120)
COLUMNS = ["event_id", "time", "principal_user_id", "agent_instance_id", "tool_name",
           "trace_id", "session_id", "delegation_id", "gt_delegation_id", "covered",
           "delegation_binding"]


def evaluable(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("covered") & (pl.col("delegation_binding") == "bound")
                     & pl.col("gt_delegation_id").is_not_null())


def _dense(keys: pl.Series) -> np.ndarray:
    return keys.rank("dense").cast(pl.Int64).to_numpy() - 1


def units_cim(df: pl.DataFrame, delta_s: float | None = None) -> np.ndarray:
    return _dense(df["delegation_id"])


def _b0_key(df: pl.DataFrame) -> pl.Series:
    return df.select(pl.when(pl.col("trace_id").is_not_null())
                     .then(pl.lit("t:") + pl.col("trace_id"))
                     .when(pl.col("session_id").is_not_null())
                     .then(pl.lit("s:") + pl.col("session_id"))
                     .otherwise(pl.lit("e:") + pl.col("event_id"))).to_series()


def units_b0(df: pl.DataFrame, delta_s: float | None = None) -> np.ndarray:
    return _dense(_b0_key(df))


def _window_chains(df: pl.DataFrame, keys: list[str], delta_s: float) -> np.ndarray:
    """Unit ids of Delta-chains: sorted by keys then time, a new unit starts at a key change
    or a gap above Delta."""
    idx = (df.with_row_index("_i")
           .sort([*keys, "time", "event_id"])
           .with_columns(pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1))
                                            for k in keys]).alias("_newkey"),
                         (pl.col("time").diff().dt.total_microseconds()
                          > int(delta_s * 1e6)).alias("_gap"))
           .with_columns((pl.col("_newkey") | pl.col("_gap").fill_null(True))
                         .cum_sum().alias("_u")))
    out = np.empty(df.height, dtype=np.int64)
    out[idx["_i"].to_numpy()] = idx["_u"].to_numpy() - 1
    return out


def units_b1(df: pl.DataFrame, delta_s: float | None = None) -> np.ndarray:
    """Consecutive windows of width Delta over the run (module docstring)."""
    assert delta_s is not None
    us = df["time"].dt.epoch("us").to_numpy()
    return _dense(pl.Series(us // int(delta_s * 1e6)))


def _components(n: int, *partitions: np.ndarray) -> np.ndarray:
    """Connected components of the union of several partitions of the same n rows."""
    src, dst = [], []
    offset = n
    for part in partitions:
        src.append(np.arange(n))
        dst.append(part + offset)  # each row links to a node standing for its group
        offset += int(part.max()) + 1 if n else 0
    rows = np.concatenate(src)
    cols = np.concatenate(dst)
    g = coo_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(offset, offset))
    _, labels = connected_components(g, directed=False)
    return _dense(pl.Series(labels[:n]))


B2_CHAINS = (("principal_user_id",), ("agent_instance_id",), ("tool_name",))


def units_b2(df: pl.DataFrame, delta_s: float | None = None) -> np.ndarray:
    assert delta_s is not None
    chains = [_window_chains(df, list(keys), delta_s) for keys in B2_CHAINS]
    return _components(df.height, units_b0(df), *chains)


UnitFn = Callable[[pl.DataFrame, float | None], np.ndarray]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    units: UnitFn
    windowed: bool


METHODS: dict[str, Method] = {
    "CIM": Method("CIM", units_cim, False),
    "B0": Method("B0", units_b0, False),
    "B1": Method("B1", units_b1, True),
    "B2": Method("B2", units_b2, True),
}


def unit_metrics(gt: pl.Series, unit: np.ndarray) -> pl.DataFrame:
    """Per delegation: n, log10 Amb, recall, precision, f1, the number of units and the
    candidates sharing the best unit."""
    df = pl.DataFrame({"d": gt, "u": unit})
    dk = df.group_by("u").agg(pl.col("d").n_unique().alias("nd"), pl.len().alias("size"))
    pairs = df.group_by("d", "u").agg(pl.len().alias("c")).join(dk, on="u")
    best = (pairs.sort(["d", "c", "u"], descending=[False, True, False])
            .group_by("d", maintain_order=True).first()
            .select("d", pl.col("c").alias("best"), pl.col("size").alias("best_size"),
                    pl.col("nd").alias("n_cand")))
    per_d = (pairs.group_by("d")
             .agg(pl.col("c").sum().alias("n"), pl.col("nd").log10().sum().alias("log10_amb"),
                  pl.len().alias("n_units"))
             .join(best, on="d")
             .with_columns((pl.col("best") / pl.col("n")).alias("rec"),
                           (pl.col("best") / pl.col("best_size")).alias("prec"))
             .with_columns((2 * pl.col("rec") * pl.col("prec")
                            / (pl.col("rec") + pl.col("prec"))).alias("f1"))
             .drop("best", "best_size").rename({"d": "gt_delegation_id"}))
    return per_d


def amb_run(gt: pl.Series, unit: np.ndarray) -> float:
    """log10 Amb(E) of a whole run: sum over units of log10 |D(K)|."""
    df = pl.DataFrame({"d": gt, "u": unit})
    return float(df.group_by("u").agg(pl.col("d").n_unique().log10()).select(
        pl.col("d").sum()).item())


def comp(df: pl.DataFrame) -> pl.DataFrame:
    return df.group_by("gt_delegation_id").agg(
        pl.col("trace_id").drop_nulls().n_unique().alias("comp"))


def closure_metrics(df: pl.DataFrame, roots: pl.DataFrame) -> pl.DataFrame:
    """``CIM-closure``: units are lineage families (``delegation_id`` mapped to its root by
    the side table, §5.3), scored against the ground-truth families of ``gt_delegation_id``
    — "all actions under d including descendants" for every root d."""
    m = roots.select("delegation_id", "root_delegation_id")
    j = (df.join(m, on="delegation_id", how="left")
         .join(m.rename({"delegation_id": "gt_delegation_id",
                         "root_delegation_id": "gt_root"}), on="gt_delegation_id", how="left"))
    gt = j["gt_root"].fill_null(j["gt_delegation_id"])
    unit = _dense(j["root_delegation_id"].fill_null(j["delegation_id"]))
    fam = j.with_columns(gt.alias("gt_delegation_id")).pipe(comp)
    return unit_metrics(gt, unit).with_columns(
        pl.lit("CIM-closure").alias("method"), pl.lit(None, pl.Float64).alias("delta_s"),
        pl.lit(amb_run(gt, unit)).alias("log10_amb_run")).join(
        fam, on="gt_delegation_id", how="left")


def evaluate(events: pl.DataFrame, deltas: Iterable[float] = DELTAS_S,
             methods: Iterable[str] = ("CIM", "B0", "B1", "B2"),
             roots: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (method, delta, delegation) metrics over one run's evaluable events; with the
    side table's ``roots`` also the lineage-closure reconstruction (``CIM-closure``)."""
    df = evaluable(events)
    if df.height == 0:
        return pl.DataFrame()
    gt = df["gt_delegation_id"]
    c = comp(df)
    frames = []
    for name in methods:
        m = METHODS[name]
        for delta in (deltas if m.windowed else [None]):
            unit = m.units(df, delta)
            per_d = unit_metrics(gt, unit).with_columns(
                pl.lit(name).alias("method"), pl.lit(delta, pl.Float64).alias("delta_s"),
                pl.lit(amb_run(gt, unit)).alias("log10_amb_run"))
            frames.append(per_d)
    out = pl.concat(frames).join(c, on="gt_delegation_id", how="left")
    if roots is not None:
        out = pl.concat([out, closure_metrics(df, roots).select(out.columns)])
    return out.with_columns(pl.lit(gt.n_unique()).alias("delegations_in_run"))


def best_deltas(per_d: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Per group (e.g. workflow) and method, the Delta with the highest mean f1 (§7.2.2
    "best-performing Delta reported per workflow")."""
    scores = (per_d.group_by([*by, "method", "delta_s"])
              .agg(pl.col("f1").mean().alias("mean_f1"))
              .sort([*by, "method", "mean_f1", "delta_s"],
                    descending=[False] * (len(by) + 1) + [True, False]))
    return scores.group_by([*by, "method"], maintain_order=True).first()


def summarize(per_d: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Table 5 rows: Amb (median, p95), Rec (median, p05), Comp (median, p95, >1) at the
    best Delta of each windowed method."""
    best = best_deltas(per_d, by).select([*by, "method", "delta_s"])
    chosen = per_d.join(best, on=[*by, "method", "delta_s"], how="inner", nulls_equal=True)
    q = lambda c, p: pl.col(c).quantile(p, "nearest")  # noqa: E731
    return (chosen.group_by([*by, "method"])
            .agg(pl.col("delta_s").first(), pl.len().alias("n_delegations"),
                 (10 ** q("log10_amb", 0.5)).round(0).alias("amb_median"),  # Amb is an integer
                 (10 ** q("log10_amb", 0.95)).round(0).alias("amb_p95"),
                 q("rec", 0.5).alias("rec_median"), q("rec", 0.05).alias("rec_p05"),
                 q("prec", 0.5).alias("prec_median"), q("prec", 0.05).alias("prec_p05"),
                 q("n_cand", 0.5).alias("cand_median"), q("n_cand", 0.95).alias("cand_p95"),
                 q("log10_amb", 0.5).alias("log10_amb_median"),
                 q("log10_amb", 0.95).alias("log10_amb_p95"),
                 pl.col("file").n_unique().alias("n_runs")
                 if "file" in chosen.columns else pl.lit(1).alias("n_runs"),
                 pl.col("delegations_in_run").median().alias("delegations_per_run"),
                 q("comp", 0.5).alias("comp_median"), q("comp", 0.95).alias("comp_p95"),
                 (pl.col("comp") > 1).mean().alias("comp_gt1"))
            .join(_runs(chosen, by), on=[*by, "method"], how="left")
            .sort([*by, "method"]))


def _runs(chosen: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Whole-run Amb(E) (§7.2.4: groupings of the run's events consistent with the
    telemetry), median and p95 over runs, as log10 (it overflows floats)."""
    key = [*by, "method", *(["file"] if "file" in chosen.columns else [])]
    per_run = chosen.group_by(key).agg(pl.col("log10_amb_run").first())
    q = lambda p: pl.col("log10_amb_run").quantile(p, "nearest")  # noqa: E731
    return per_run.group_by([*by, "method"]).agg(q(0.5).alias("log10_amb_run_median"),
                                                 q(0.95).alias("log10_amb_run_p95"))


def reconstruct_store(store: object, deltas: Iterable[float] = DELTAS_S,
                      max_buckets: int | None = None,
                      methods: Iterable[str] = ("CIM", "B0", "B1", "B2")
                      ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Evaluate every events file (one telemetry run each) of a store.

    Returns per-delegation metrics (with ``workflow`` and ``file``) and per-run counts:
    events, evaluated, uncovered and unbound (counted, never dropped), log10 Amb(E)."""
    from containmentbench.cim.store import Store, partition_of

    assert isinstance(store, Store)
    seen: dict[str, int] = {}
    frames, runs = [], []
    methods = tuple(methods)
    roots = store.delegations().select("delegation_id", "root_delegation_id").collect()
    for rel in store.files:
        wf = partition_of(rel).get("workflow", "all")
        if max_buckets is not None and seen.get(wf, 0) >= max_buckets:
            continue
        seen[wf] = seen.get(wf, 0) + 1
        df = pl.read_parquet(store.root / rel, columns=COLUMNS)
        rel_roots = roots.join(pl.DataFrame({"delegation_id": df["delegation_id"].drop_nulls()
                                             .unique()}), on="delegation_id", how="semi")
        per_d = evaluate(df, deltas, methods, rel_roots)
        n_eval = evaluable(df).height
        runs.append({"workflow": wf, "file": rel, "n_events": df.height, "n_evaluated": n_eval,
                     "n_uncovered": int((~df["covered"]).sum()),
                     "n_unbound": int((df["covered"]
                                       & (df["delegation_binding"] != "bound")).sum())})
        if per_d.height:
            frames.append(per_d.with_columns(pl.lit(wf).alias("workflow"),
                                             pl.lit(rel).alias("file")))
    per = pl.concat(frames) if frames else pl.DataFrame()
    return per, pl.DataFrame(runs)
