"""Any paired comparison on demand: defense ``a`` against defense ``b`` on one metric and
stage, with the statistics of the configured comparisons of Tables 12 and 25 (paper 000
eq. 12 and §6.5), not a second implementation of them.

The pairs, the pair and scenario-cluster percentile bootstrap and the win rate are
:func:`containmentbench.analysis.paired.compare`'s; the settings (resamples, confidence, base
seed, batch bound) are the run's own (``analysis.json``'s ``config``), and the rows are the
ones ``analyze`` resamples (:func:`containmentbench.analysis.seeds.interval_rows`: one seed
when the study declared its seeds copies). Each interval's seed is derived from its key
(``Settings.seed_for``), so a configured pair asked for here gives the numbers of its table
row, byte for byte.

The record uses the one vocabulary of every results file: ``estimate`` (b - a, eq. 12),
``ci_low``/``ci_high`` (the scenario-cluster interval, §6.5: the primary one),
``pair_ci_low``/``pair_ci_high`` (the pair interval), ``n`` (matched pairs), ``n_clusters``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from containmentbench.analysis.paired import Comparison, Settings, compare, higher_is_better
from containmentbench.analysis.seeds import interval_rows
from containmentbench.errors import BenchError
from containmentbench.metrics.glossary import TERMS

#: the stages a comparison may name; ``all`` pools every stage where the metric is defined
STAGES = ("all", "security", "memory_recovery", "active_tainted", "clean")
METHOD = ("paired delta b - a over (scenario, model, seed) pairs (eq. 12); 95% scenario-"
          "cluster and pair percentile bootstrap intervals (§6.5)")


def check(df: pl.DataFrame, a: str, b: str, metric: str, stage: str) -> None:
    """One-line errors naming the unknown defense, metric or stage (exit 2)."""
    have = sorted(df["defense"].unique().to_list())
    for field, d in (("a", a), ("b", b)):
        if d not in have:
            raise BenchError(f"unknown defense '{d}' (this run has: {', '.join(have)})",
                             field=field)
    if a == b:
        raise BenchError(f"a and b are the same defense '{a}'; compare two", field="b")
    if metric not in TERMS or metric not in df.columns:
        known = sorted(k for k in TERMS if k in df.columns)
        raise BenchError(f"unknown metric '{metric}' (a glossary key of docs/metrics.md, "
                         f"e.g. {', '.join(known[:6])}, ...)", field="metric")
    dtype = df.schema[metric]
    if not (dtype.is_numeric() or dtype == pl.Boolean):
        raise BenchError(f"metric '{metric}' is not numeric; it has no mean to compare",
                         field="metric")
    if stage not in STAGES:
        raise BenchError(f"unknown stage '{stage}' (known: {', '.join(STAGES)})",
                         field="stage")


def comparison(df: pl.DataFrame, cfg: Mapping[str, Any], a: str, b: str, metric: str,
               stage: str = "all") -> dict[str, Any]:
    """The paired comparison ``b - a`` of ``metric`` on ``stage`` over the metrics frame
    ``df`` of one run, with the analysis settings ``cfg`` of that run, as one record."""
    check(df, a, b, metric, stage)
    s = Settings.from_config(cfg)
    c = compare(interval_rows(df), a, b, metric, stage, s)
    # no cluster interval: no matched pair with the metric defined on both sides
    return record(c, c.cluster.n_clusters if c.cluster else 0, df, s)


def record(c: Comparison, n_clusters: int, df: pl.DataFrame, s: Settings) -> dict[str, Any]:
    backends = sorted(df["backend"].unique().to_list())
    return {
        "study": ", ".join(sorted(df["study"].unique().to_list())),
        "model": ", ".join(sorted(df["model"].unique().to_list())),
        "backend": ", ".join(backends), "sim_agent": "sim" in backends,
        "comparison": f"{c.a} vs {c.b}", "a": c.a, "b": c.b, "metric": c.metric,
        "stage": c.stage, "statistic": "paired_delta", "interval": "cluster",
        "estimate": c.delta,
        "ci_low": c.cluster.low if c.cluster else None,
        "ci_high": c.cluster.high if c.cluster else None,
        "pair_ci_low": c.pair.low if c.pair else None,
        "pair_ci_high": c.pair.high if c.pair else None,
        "n": c.n_pairs, "n_clusters": n_clusters,
        "mean_a": c.mean_a, "mean_b": c.mean_b, "win_rate": c.win_rate,
        "higher_is_better": higher_is_better(c.metric),
        "interpretation": c.interpretation, "method": METHOD,
        "resamples": s.resamples, "confidence": s.confidence}


def text(rec: Mapping[str, Any]) -> str:
    """The record for the terminal: one line of numbers, one of context."""
    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:+.3f}"

    def m(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    pct = f"{100 * rec['confidence']:g}%"
    lines = [f"{rec['metric']} ({rec['stage']}): {rec['b']} - {rec['a']} = "
             f"{f(rec['estimate'])} [{f(rec['ci_low'])}, {f(rec['ci_high'])}] ({pct} "
             f"scenario-cluster interval; pair interval [{f(rec['pair_ci_low'])}, "
             f"{f(rec['pair_ci_high'])}])",
             f"  n {rec['n']} pairs in {rec['n_clusters']} scenario clusters; mean "
             f"{rec['a']} {m(rec['mean_a'])}, {rec['b']} {m(rec['mean_b'])}; win rate of "
             f"{rec['b']} {m(rec['win_rate'])}; {rec['interpretation']}",
             f"  study {rec['study']}; model {rec['model']}; backend {rec['backend']}; "
             f"{rec['resamples']} resamples"]
    if rec["sim_agent"]:
        from containmentbench.analysis.tables import SIM_NOTE

        lines.append(f"  {SIM_NOTE}")
    return "\n".join(lines) + "\n"
