"""Offline reparse of a traces folder: stored raw completions re-parsed, no model called."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from containmentbench.parser.core import DEFAULT_CONFIG, ParserConfig
from containmentbench.parser.reparse import reparse_rows
from containmentbench.progress import progress
from containmentbench.trace.io import read_table, shard_dirs

COLS = ["rollout_id", "seq", "kind", "text", "parse_status", "repaired", "repairs", "args"]


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def reparse_traces(traces: str | Path, out: str | Path,
                   config: ParserConfig = DEFAULT_CONFIG) -> dict[str, Any]:
    """Re-parse every model_call below ``traces``; writes ``reparse.parquet`` (per action,
    old/new status) and ``summary.json`` (Table 24 quantities) into ``out``."""
    rows: list[dict[str, Any]] = []
    for shard in progress(shard_dirs(traces), "reparse: trace shards", unit="shard"):
        t = read_table(shard / "events.parquet", "events", COLS)
        t = t.filter(pc.equal(t.column("kind"), "model_call"))
        rows.extend(t.to_pylist())
    records, summary = reparse_rows(rows, config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if records:
        table = pa.Table.from_pylist(records)
    else:
        table = pa.table({"rollout_id": pa.array([], pa.string())})
    tmp = out / f".reparse.parquet.tmp-{os.getpid()}"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, out / "reparse.parquet")
    _atomic_bytes(out / "summary.json",
                  (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
    return summary
