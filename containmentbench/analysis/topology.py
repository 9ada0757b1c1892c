"""Utility per topology (``tables/utility_by_topology.*``, one headline line per quantity).

A single agent, a supervisor and its worker, and a chain of three agents solve the same task
with different chances: the supervisor must delegate and the worker act on what it is told,
a chain relays twice. A utility mean over a stage that mixes topologies in other proportions
than another stage compares different things (issue "real-model suite": a clean stage of three
supervisor-worker scenarios and one single-agent scenario against an active-tainted stage of two
and two). So authorized completion (eq. 6, active-tainted stage) and clean completion (clean
stage) are also given per defense and topology, each a mean (eq. 7) with its scenario-cluster
95% interval (§6.5) over the topology's scenarios, N rollouts and the number of clusters;
provider errors are excluded (as every outcome table does). A quantity whose stage the study
lacks is left out.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from containmentbench.analysis.paired import Settings, stage_rows
from containmentbench.analysis.parallel import IntervalPool, cluster_ci, resolve
from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table
from containmentbench.metrics.glossary import STAGE_LABEL, TERMS

TOPOLOGIES = ("single", "supervisor_worker", "peer_chain")
TOPOLOGY_LABEL = {"single": "single agent", "supervisor_worker": "supervisor-worker",
                  "peer_chain": "peer chain"}
#: (metrics column, stage)
QUANTITIES = (("authorized_tainted_action_success", "active_tainted"),
              ("clean_benign_completion", "clean"))
_SCHEMA = {"defense": pl.String, "metric": pl.String, "quantity": pl.String,
           "stage": pl.String, "topology": pl.String, "n": pl.Int64, "n_clusters": pl.Int64,
           "estimate": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64}


def _topologies(df: pl.DataFrame) -> list[str]:
    present = set(df["topology"].unique().to_list())
    return [t for t in TOPOLOGIES if t in present] + sorted(present - set(TOPOLOGIES))


def utility_by_topology(df: pl.DataFrame, ctx: Context, s: Settings,
                        pool: IntervalPool | None = None) -> Table:
    pool = pool if pool is not None else IntervalPool(1)
    base = stage_rows(df, "all")
    rows: list[dict[str, Any]] = []
    for col, stage in QUANTITIES:
        in_stage = base.filter((pl.col("stage") == stage) & pl.col(col).is_not_null())
        if in_stage.height == 0:
            continue
        for d in ctx.defenses:
            mine = in_stage.filter(pl.col("defense") == d)
            for topo in _topologies(mine):
                sub = mine.filter(pl.col("topology") == topo)
                rows.append({"defense": d, "metric": col, "quantity": TERMS[col].display,
                             "stage": stage, "topology": topo,
                             "ci": cluster_ci(sub, col, s, pool, "topology", d, col, stage,
                                              topo)})
    frame = pl.DataFrame(resolve(rows), schema=_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=_SCHEMA)
    return Table("utility_by_topology", ctx.caption(
        "Utility per topology: authorized completion (eq. 6, active-tainted stage) and clean "
        "completion (clean stage) per defense and topology; means (eq. 7) with "
        "scenario-cluster 95% intervals (§6.5) over the topology's scenarios; n rollouts over "
        "n_clusters scenarios; provider errors excluded."), frame)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def headline_sentences(frame: pl.DataFrame, defenses: list[str]) -> list[str]:
    """One sentence per utility quantity: its value per topology under ``none`` (the positive
    control, what the model does undefended), or the study's first defense without it; only
    when the stage has more than one topology."""
    if frame.height == 0:
        return []
    who = "none" if "none" in defenses else defenses[0]
    out = []
    for col, stage in QUANTITIES:
        mine = [r for r in frame.iter_rows(named=True)
                if r["metric"] == col and r["defense"] == who]
        if len(mine) < 2:
            continue
        parts = []
        for r in mine:
            value = "n/a" if r["estimate"] is None else (
                f"{r['estimate']:.3f} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]")
            parts.append(f"{TOPOLOGY_LABEL.get(r['topology'], r['topology'])} {value} "
                         f"({r['n_clusters']} scenarios)")
        out.append(f"{TERMS[col].display} ({STAGE_LABEL.get(stage, stage).lower()}) by "
                   f"topology under {who}: {'; '.join(parts)} (every defense: table "
                   f"utility_by_topology).")
    return out
