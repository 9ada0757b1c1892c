"""``tables/throughput.*``: the study's throughput as data, in ``results.parquet``'s columns.

One row per figure of each rollout job that wrote the study's current traces (the ``job``
column of the shards' ``timings.parquet``) and of the study (those jobs pooled; ``job``
null): rollouts per hour, model calls, prompt and output tokens per second and the
prefix-cache hit rate (``statistic`` ``rate``), and the counts and run seconds they rest on
(``count``, ``seconds``). Definitions: ``pipeline/throughput.py`` (paper 000 reports no
throughput; they are the project's). A figure the backend does not give (the simulated
agent's tokens, a cache hit rate the engine does not expose) is a row with a null estimate
and its ``method`` saying why; the simulated agent's rows are ``sim_agent`` true: they
measure the harness, not a model.

Wall clock: the table is written beside ``results.parquet``, never in it (so that a study run
twice with the same config and seeds still gives byte-identical results), and ``analyze``
lists it under ``analysis.json``'s ``wall_clock``: ``freeze`` hashes it as written,
``reproduce`` does not compare it (docs/results.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.results import COLUMNS
from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table
from containmentbench.pipeline.throughput import job_records, pooled

NAME = "throughput"
#: results.parquet's columns, then the job (null: the study's pooled figures)
SCHEMA = {**COLUMNS, "job": pl.String}
#: (metric, statistic) of every row of one job or the study, in order
FIGURES = (("rollouts_per_hour", "rate"), ("model_calls_per_s", "rate"),
           ("prompt_tokens_per_s", "rate"), ("output_tokens_per_s", "rate"),
           ("prefix_cache_hit_rate", "rate"), ("rollouts", "count"), ("model_calls", "count"),
           ("call_errors", "count"), ("prompt_tokens", "count"), ("output_tokens", "count"),
           ("cached_tokens", "count"), ("run_s", "seconds"))


def trace_jobs(traces: Path) -> list[str]:
    """The rollout jobs that wrote the shards under ``traces`` (their timings' ``job``)."""
    if not traces.is_dir():
        return []
    names: set[str] = set()
    for f in sorted(traces.rglob("timings.parquet")):
        t = pl.read_parquet(f, columns=["job"])
        names |= {j for j in t["job"].unique().to_list() if j}
    return sorted(names)


def _method(rec: dict[str, Any], metric: str, scope: str) -> str:
    if metric == "prefix_cache_hit_rate":
        why = ("cached prompt tokens / prompt tokens of the calls the engine reported on"
               if rec["prefix_cache_hit_rate"] is not None else rec["prefix_cache"])
    elif metric in ("prompt_tokens_per_s", "output_tokens_per_s", "prompt_tokens",
                    "output_tokens", "cached_tokens"):
        why = f"tokens: {rec['tokens']}"
    else:
        why = "count / run seconds" if metric.endswith(("_per_s", "_per_hour")) else "count"
    return f"wall clock, {scope}: {why} (pipeline/throughput.py)"


def throughput_table(run: Path, traces: Path, ctx: Context) -> Table | None:
    """The throughput rows of the run at ``run`` (None when no job record of its traces'
    jobs holds figures: a study made before throughput was recorded, a reproduce scratch)."""
    recs = job_records(run, trace_jobs(traces))
    if not recs:
        return None
    study = pooled(recs.values()) or {}
    rows: list[dict[str, Any]] = []
    scopes: list[tuple[str | None, dict[str, Any]]] = [*sorted(recs.items()), (None, study)]
    for job, rec in scopes:
        scope = f"job {job}" if job is not None else \
            f"study: {len(recs)} job(s) pooled (summed counts / summed run seconds)"
        for metric, statistic in FIGURES:
            v = rec.get(metric)
            rows.append({**ctx.origin, "sim_agent": bool(ctx.sim or rec["sim_agent"]),
                         "source_table": NAME, "source_row": len(rows),
                         "source_column": "estimate", "comparison": None, "defense": None,
                         "stage": "all", "metric": metric, "statistic": statistic,
                         "interval": None, "estimate": None if v is None else float(v),
                         "ci_low": None, "ci_high": None,
                         "method": _method(rec, metric, scope), "n": int(rec["rollouts"]),
                         "n_clusters": None, "job": job})
    return Table(NAME, ctx.caption(
        "Throughput (wall clock, not a result of the defenses): rollouts per hour, model calls "
        "and tokens per second and the prefix-cache hit rate of each rollout job and of the "
        "study (jobs pooled), over the run time after the engine load; null where the backend "
        "does not report it. A measurement of this machine, kept out of results.parquet and "
        "not compared by reproduce."), pl.DataFrame(rows, schema=SCHEMA))
