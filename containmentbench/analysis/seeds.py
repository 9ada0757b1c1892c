"""Seed variance of per-seed means (paper Appendix J, Table 26), and whether seeds are
replicates at all.

Table 26 asks whether a result is dominated by a single rollout seed: for every group
(evidence stage, defense, metric, ...) it reports the number of seeds and the mean, the
standard deviation and the range of the per-seed means.

A seed is only a replicate if it changed what the model did. :func:`distinct_traces` counts,
per scenario, how many of its seeds gave distinct traces (distinct ``completion_digest``:
what every model call said, in order); Table 26 and every interval report it, so five copies
of a greedy rollout cannot pass for five draws. A study that declared its seeds
``non_replicates`` (config/decoding.py) resamples one seed only (:func:`interval_rows`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from containmentbench.analysis.exact import fmean, fstd

__all__ = ["distinct_traces", "interval_rows", "seed_variance"]

_OUTPUT = ("n_seeds", "mean", "std", "range")


def seed_variance(
    df: pl.DataFrame | pl.LazyFrame,
    keys: list[str],
    seed_col: str,
    value_col: str,
) -> pl.DataFrame:
    """Per group of ``keys``: n_seeds, mean, std and range of the per-seed means.

    The per-seed mean is the mean of ``value_col`` over the rows of one (group, seed);
    null values are ignored, and a seed whose values are all null does not count.
    ``mean`` is the mean of the per-seed means, ``std`` their sample standard deviation
    (ddof=1; null with a single seed) and ``range`` max - min (0.0 with a single seed).
    Groups are sorted by ``keys``; ``keys=[]`` summarises the whole frame in one row.
    """
    lazy = df.lazy() if isinstance(df, pl.DataFrame) else df
    schema = lazy.collect_schema()
    _check_columns(schema, keys, seed_col, value_col)

    # Polars groups the rows; the sums are exactly rounded (math.fsum), so the table does
    # not depend on the summation order a multi-threaded group-by happens to use.
    grouped = (
        lazy.group_by([*keys, seed_col])
        .agg(pl.col(value_col).cast(pl.Float64).drop_nulls().alias("_v"))
        .collect()
    )
    # One flat array and its segments instead of a Python list per (group, seed). A seed
    # without values has no mean (fmean of nothing) and is dropped first, so every segment
    # is non-empty whatever explode does with an empty list.
    grouped = grouped.filter(pl.col("_v").list.len() > 0)
    lengths = grouped["_v"].list.len().to_numpy()
    flat = grouped["_v"].explode().to_numpy()
    segments = np.split(flat, np.cumsum(lengths)[:-1]) if grouped.height else []
    key_rows = grouped.select(keys).rows() if keys else [()] * grouped.height
    by_group: dict[tuple, list[float]] = {}
    for key, values in zip(key_rows, segments, strict=True):
        m = fmean(values)
        if m is not None:
            by_group.setdefault(key, []).append(m)
    rows = []
    for key, means in by_group.items():
        rows.append({**dict(zip(keys, key)), "n_seeds": len(means), "mean": fmean(means),
                     "std": fstd(means, ddof=1), "range": max(means) - min(means)})
    schema = {**{k: grouped.schema[k] for k in keys}, "n_seeds": pl.Int64, "mean": pl.Float64,
              "std": pl.Float64, "range": pl.Float64}
    out = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    return out.sort(keys, nulls_last=True) if keys else out


def _check_columns(schema: pl.Schema, keys: list[str], seed_col: str, value_col: str) -> None:
    if isinstance(keys, str):
        raise ValueError(f"keys must be a list of column names, got the string {keys!r}")
    missing = [c for c in [*keys, seed_col, value_col] if c not in schema]
    if missing:
        raise ValueError(f"seed_variance: missing column(s) {missing}; have {schema.names()}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"seed_variance: duplicate keys {keys}")
    for role, col in (("seed_col", seed_col), ("value_col", value_col)):
        if col in keys:
            raise ValueError(f"seed_variance: {role} {col!r} is also a key")
    if seed_col == value_col:
        raise ValueError(f"seed_variance: seed_col and value_col are both {seed_col!r}")
    dtype = schema[value_col]
    if not (dtype.is_numeric() or dtype == pl.Boolean):
        raise ValueError(f"seed_variance: value_col {value_col!r} must be numeric, is {dtype}")
    clash = [c for c in _OUTPUT if c in keys]
    if clash:
        raise ValueError(f"seed_variance: key names {clash} clash with output columns")


def distinct_traces(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per group of ``keys`` (``[]``: one row for the whole frame): ``n_seeds`` (the most
    seeds any scenario has) and ``distinct_traces``, the mean over scenarios of the number of
    distinct completion digests among its seeds (``n_seeds`` when every seed changed the
    trace, 1 when all are copies). Provider errors are left out (they are not outcomes)."""
    ks = list(keys) or ["_all"]
    base = df.filter(pl.col("status") != "error")
    if not keys:
        base = base.with_columns(pl.lit(0).alias("_all"))
    per = (base.group_by([*ks, "scenario_id"])
           .agg(pl.col("seed").n_unique().alias("_s"),
                pl.col("completion_digest").n_unique().alias("_d")))
    out = per.group_by(ks).agg(pl.col("_s").max().alias("n_seeds"),
                               pl.col("_d").cast(pl.Float64).alias("_v"))
    rows = [{**{k: r[k] for k in keys}, "n_seeds": int(r["n_seeds"]),
             "distinct_traces": fmean(r["_v"])} for r in out.iter_rows(named=True)]
    schema = {**{k: base.schema[k] for k in keys}, "n_seeds": pl.Int64,
              "distinct_traces": pl.Float64}
    frame = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(
        schema=schema)
    return frame.sort(keys) if keys else frame


def interval_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The rows intervals resample: all of them, or only the lowest seed's when the study
    declared its seeds non-replicates (greedy decoding: the other seeds are copies, and
    resampling them as pairs would shrink every interval; §6.5, config/decoding.py)."""
    if "decoding" not in df.columns:
        return df
    import json

    policies = {json.loads(d)["seed_policy"] if json.loads(d) else "replicates"
                for d in df["decoding"].unique().to_list()}
    if "non_replicates" not in policies:
        return df
    return df.filter(pl.col("seed") == df["seed"].min())
