"""Offline reparse of a traces folder: stored raw completions re-parsed, no model called."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.integrity import writer
from containmentbench.parser.core import DEFAULT_CONFIG, ParserConfig
from containmentbench.parser.reparse import reparse_rows
from containmentbench.progress import progress
from containmentbench.trace.io import read_table, shard_dirs
from containmentbench.trace.validate import check_events

COLS = ["rollout_id", "seq", "kind", "text", "parse_status", "repaired", "repairs", "args"]


KIND = "reparse"
FILES = ("reparse.parquet", "summary.json")


def check_out(out: str | Path, force: bool = False) -> None:
    """Refuse a foreign ``--out`` (or a frozen study's, without ``force``) before any work."""
    writer.check_out(Path(out), KIND, force, accept=("folder",))
    for name in FILES:
        writer.check_file(Path(out) / name, KIND, force)


def reparse_traces(traces: str | Path, out: str | Path,
                   config: ParserConfig = DEFAULT_CONFIG, force: bool = False) -> dict[str, Any]:
    """Re-parse every model_call below ``traces``; writes ``reparse.parquet`` (per action,
    old/new status) and ``summary.json`` (Table 24 quantities) into ``out``."""
    rows: list[dict[str, Any]] = []
    recorded: set[str] = set()
    for shard in progress(shard_dirs(traces), "reparse: trace shards", unit="shard"):
        ro = read_table(shard / "rollouts.parquet", "rollouts", ["parser_version"])
        recorded |= set(ro.column("parser_version").to_pylist())
        t = read_table(shard / "events.parquet", "events", COLS)
        check_events(t, str(shard / "events.parquet"))
        t = t.filter(pc.equal(t.column("kind"), "model_call"))
        rows.extend(t.to_pylist())
    records, summary = reparse_rows(rows, config)
    # which parser the rollouts were recorded with (study.parser): Table 24's "old" side
    summary["recorded_parser_versions"] = sorted(recorded)
    out = Path(out)
    check_out(out, force)
    writer.ensure_dir(out, KIND)
    if records:
        table = pa.Table.from_pylist(records)
    else:
        table = pa.table({"rollout_id": pa.array([], pa.string())})
    writer.write_bytes(out / "reparse.parquet", writer.parquet_bytes(table, compression="zstd"),
                       kind=KIND, force=force)
    writer.write_json(out / "summary.json", summary, kind=KIND, force=force)
    return summary
