"""Refuse to pool: one traces folder or metrics table holds one model under one config.

Every shard written by a study job carries ``SHARD.json`` with its model and *run key* (a
hash of the model, backend identity, runtime settings, study and suite:
:func:`containmentbench.pipeline.plan.run_key`). ``metrics`` and ``analyze`` call these checks
first, so a folder that already holds another model's or another config's traces is refused
with a one-line error instead of doubling Table 3's rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from containmentbench.errors import BenchError
from containmentbench.trace.io import shard_dirs

SHARD_RECORD = "SHARD.json"


def _identity(shard: Path) -> tuple[str, str | None]:
    rec = shard / SHARD_RECORD
    if rec.exists():
        from containmentbench.integrity.inputs import load_json

        r = load_json(rec, "shard_record")
        return r["model"], r["run_key"]
    models = set(pq.read_table(shard / "rollouts.parquet", columns=["model"])
                 .column("model").to_pylist())
    if len(models) > 1:
        raise BenchError(f"one shard holds several models ({', '.join(sorted(models))})",
                         file=str(shard))
    return (models.pop() if models else ""), None


def check_traces(root: str | Path, shards: Iterable[Path] | None = None) -> None:
    """One model and one run key below ``root`` (a run's ``traces/``), or among ``shards``
    when given (the study's plan), or a one-line error."""
    seen: dict[tuple[str, str | None], Path] = {}
    for shard in shard_dirs(root) if shards is None else shards:
        ident = _identity(shard)
        if seen and ident not in seen:
            (model, key), first = next(iter(seen.items()))
            what = f"model '{ident[0]}' beside '{model}'" if ident[0] != model else \
                f"model '{model}' under another configuration (run key {ident[1]} vs {key})"
            raise BenchError(f"refusing to pool: {what} in one folder (first: {first}); "
                             f"each model and config needs its own run directory "
                             f"(results/<study>/<model>/)", file=str(shard))
        seen.setdefault(ident, shard)


def check_metrics(path: str | Path) -> None:
    """One model, backend, decoding and tool mode in a metrics table, or a one-line error
    (sampled and greedy, or constrained and free, results are never pooled)."""
    from containmentbench.integrity.inputs import check_column_kinds, parquet_schema
    from containmentbench.metrics.schema import METRICS

    cols = ["model", "backend", "decoding", "tool_mode", "tools_offered"]
    # these columns only: the whole table is checked by the reader that uses it
    # (metrics/schema.py check_metrics_file), after the checks of --out
    check_column_kinds(parquet_schema(path, "metrics table"),
                       pa.schema([METRICS.field(c) for c in cols]), path, "rollout_metrics")
    t = pq.read_table(path, columns=cols)
    for col in cols:
        vals = sorted(set(t.column(col).to_pylist()))
        if len(vals) > 1:
            raise BenchError(f"refusing to pool: {len(vals)} {col}s in one metrics table "
                             f"({', '.join(map(str, vals))}); analyze each model's run "
                             f"separately and compare them with `cross-model`",
                             file=str(path), field=col)
