"""On-disk layout of CIM telemetry and the delegation side table.

A store is a folder::

    events/workflow=<w>/day=<ddd>/bucket=<bbbbb>/part-0.parquet   # hive-partitioned CIM rows
    delegations.parquet    # one row per delegation: lineage edge, root, depth, file, counts
    manifest.json          # producer, parameters, counts, bytes/event

Why this layout makes delegation-scoped queries prune (the §7.4 query benchmark at scale):
rows of a delegation family (a root and its descendants, §5.3) all live in one file, sorted
by ``delegation_id`` then ``time``; generated ids are assigned in depth-first order, so the
lineage closure of any delegation is a contiguous id range and Parquet row-group statistics
skip every row group outside it. The side table (sorted by id, a few bytes per delegation)
answers "which file, which family" without touching events. Baseline correlation needs all
of a user's events together, so buckets partition users (generator.py): each bucket is a
self-contained telemetry run for the baselines of §7.2.2.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from containmentbench.cim.schema import (
    CHAIN_FIELD,
    CIM_EVENTS,
    CIM_VERSION,
    DELEGATIONS,
    parquet_options,
)
from containmentbench.errors import BenchError
from containmentbench.integrity import writer

EVENTS_DIR = "events"
DELEGATIONS_FILE = "delegations.parquet"
MANIFEST_FILE = "manifest.json"
ROW_GROUP_ROWS = 131_072


def partition_path(workflow: str, day: int, bucket: int) -> str:
    return f"{EVENTS_DIR}/workflow={workflow}/day={day:03d}/bucket={bucket:05d}/part-0.parquet"


def write_events(root: Path, rel: str, table: pa.Table, *, row_group_rows: int = ROW_GROUP_ROWS
                 ) -> int:
    """Write one events file (CIM schema, optional chain column); returns its size in bytes."""
    path = root / rel
    schema = CIM_EVENTS.append(CHAIN_FIELD) if "chain_hash" in table.column_names \
        else CIM_EVENTS
    table = table.select(schema.names).cast(schema)
    meta = {b"cim_version": CIM_VERSION.encode(), b"table": b"cim_events"}
    table = table.replace_schema_metadata(meta)
    # the whole store is built in a temporary folder and put in place at once (seal.py)
    writer.build_parquet(path, table, row_group_size=row_group_rows,
                         **parquet_options(schema.names))
    return path.stat().st_size


class DelegationWriter:
    """Streams side-table rows into ``delegations.parquet`` (bounded memory)."""

    def __init__(self, root: Path) -> None:
        self.path = root / DELEGATIONS_FILE
        meta = {b"cim_version": CIM_VERSION.encode(), b"table": b"cim_delegations"}
        self.schema = DELEGATIONS.with_metadata(meta)
        self.writer = writer.build_parquet_stream(self.path, self.schema,
                                                  **parquet_options(DELEGATIONS.names))
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self.writer.append(table.select(DELEGATIONS.names).cast(self.schema),
                               row_group_size=65_536)
            self.rows += table.num_rows

    def close(self) -> None:
        self.writer.close()


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    manifest = {"cim_version": CIM_VERSION, **manifest}
    writer.build_text(root / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def event_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / EVENTS_DIR).rglob("*.parquet"))


class Store:
    """Read access to a CIM store; every query goes through ``rows`` or ``scan``."""

    def __init__(self, root: str | Path, *, in_memory: bool = False) -> None:
        self.root = Path(root)
        if not (self.root / EVENTS_DIR).is_dir() or not (self.root / DELEGATIONS_FILE).exists():
            raise BenchError("not a CIM store (expected events/ and delegations.parquet; "
                             "run `containmentbench cim export` or `cim generate`)",
                             file=str(self.root))
        self.files = event_files(self.root)
        if not self.files:
            raise BenchError("CIM store has no events files", file=str(self.root / EVENTS_DIR))
        self._check_files()
        try:
            self.side = pl.read_parquet(self.root / DELEGATIONS_FILE) if in_memory else None
            self._events = pl.read_parquet([self.root / f for f in self.files]) \
                if in_memory else None
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise BenchError(f"cannot read CIM store ({exc})", file=str(self.root)) from None
        mpath = self.root / MANIFEST_FILE
        self.manifest: dict[str, Any] = {}
        if mpath.exists():
            from containmentbench.integrity.inputs import load_json

            self.manifest = load_json(mpath, "cim_manifest")

    def _check_files(self) -> None:
        """Every file's footer readable and its columns of the CIM kinds, before any query:
        polars reads lazily, so a truncated or foreign file used to end a query in a
        ``ComputeError`` traceback. Footers only (a few KB each), not the data."""
        from containmentbench.integrity.inputs import check_column_kinds, parquet_schema

        check_column_kinds(parquet_schema(self.root / DELEGATIONS_FILE, "CIM side table"),
                           DELEGATIONS, self.root / DELEGATIONS_FILE, "cim_delegations")
        for f in self.files:
            check_column_kinds(parquet_schema(self.root / f, "CIM events file"), CIM_EVENTS,
                               self.root / f, "cim_events")

    # ------------------------------------------------------------------ side table

    def delegations(self) -> pl.LazyFrame:
        if self.side is not None:
            return self.side.lazy()
        return pl.scan_parquet(self.root / DELEGATIONS_FILE)

    def delegation(self, delegation_id: str) -> dict[str, Any]:
        """The side-table row of one delegation (BenchError naming it if unknown)."""
        rows = self.delegations().filter(pl.col("delegation_id") == delegation_id).collect()
        if rows.height == 0:
            raise BenchError(f"unknown delegation '{delegation_id}'", field="delegation")
        return rows.row(0, named=True)

    def family(self, root_id: str) -> pl.DataFrame:
        """Side-table rows of one lineage family (a root and all its descendants)."""
        return self.delegations().filter(pl.col("root_delegation_id") == root_id).collect()

    # ------------------------------------------------------------------ events

    def scan(self, files: Sequence[str] | None = None) -> pl.LazyFrame:
        """All events (or the events of some files) as a lazy frame."""
        if self._events is not None:
            return self._events.lazy()
        paths = [self.root / f for f in (files or self.files)]
        return pl.scan_parquet(paths, missing_columns="insert", extra_columns="ignore")

    def rows(self, delegation_ids: Iterable[str], files: Sequence[str] | None = None
             ) -> pl.LazyFrame:
        """Rows of the given delegations; a range predicate lets statistics prune."""
        ids = sorted(set(delegation_ids))
        if not ids:
            return self.scan(files).head(0)
        pred = pl.col("delegation_id").is_between(pl.lit(ids[0]), pl.lit(ids[-1])) & \
            pl.col("delegation_id").is_in(ids)
        return self.scan(files).filter(pred)

    def iter_files(self) -> Iterable[tuple[str, pl.LazyFrame]]:
        for f in self.files:
            yield f, pl.scan_parquet(self.root / f)


def partition_of(rel: str) -> dict[str, str]:
    """Hive partition values of an events file path (``workflow``, ``day``, ``bucket``)."""
    out = {}
    for part in Path(rel).parts:
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


def side_table(events: pl.DataFrame) -> pa.Table:
    """Delegation side table from CIM rows carrying ``file`` and ``workflow`` columns.

    One row per delegation minted (``delegate`` rows) or seen bound on an event; the lineage
    edge comes from the minting row, root and depth from the closure (lineage.py)."""
    from containmentbench.cim.lineage import depths, roots_of

    minted = (events.filter(pl.col("event_kind") == "delegate")
              .sort("time").unique("delegation_id", keep="first", maintain_order=True)
              .select("delegation_id", "delegation_parent_id", "principal_user_id", "agent_id",
                      "agent_instance_id", pl.col("time").alias("minted_time"), "workflow",
                      "file"))
    bound = events.filter(pl.col("delegation_binding") == "bound")
    counts = bound.group_by("delegation_id").agg(
        pl.len().cast(pl.Int32).alias("n_events"), pl.col("file").first().alias("file_seen"),
        pl.col("workflow").first().alias("workflow_seen"),
        pl.col("delegation_parent_id").drop_nulls().first().alias("parent_seen"),
        pl.col("principal_user_id").first().alias("principal_seen"))
    side = minted.join(counts, on="delegation_id", how="full", coalesce=True)
    side = side.with_columns(
        pl.coalesce("delegation_parent_id", "parent_seen").alias("delegation_parent_id"),
        pl.coalesce("principal_user_id", "principal_seen").alias("principal_user_id"),
        pl.coalesce("file", "file_seen").alias("file"),
        pl.coalesce("workflow", "workflow_seen").alias("workflow"),
        pl.col("n_events").fill_null(0)).sort("delegation_id")
    parent = dict(zip(side["delegation_id"].to_list(), side["delegation_parent_id"].to_list()))
    root = roots_of(parent)
    depth = depths(parent, parent)
    ids = side["delegation_id"].to_list()
    side = side.with_columns(
        pl.Series("root_delegation_id", [root[d] for d in ids]),
        pl.Series("depth", [depth[d] for d in ids], dtype=pl.Int16),
        pl.lit(None, pl.Boolean).alias("gt_drift"), pl.lit(None, pl.Boolean).alias("gt_approved"))
    return side.select(DELEGATIONS.names).to_arrow().cast(DELEGATIONS)


def write_store(root: Path, table: pa.Table, workflow: str = "custom",
                manifest: dict[str, Any] | None = None) -> Path:
    """A one-file store from CIM rows in emission order (hand-built or converted telemetry)."""
    final = Path(root)
    root = writer.begin_dir(final, "cim-store")
    rel = partition_path(workflow, 0, 0)
    size = write_events(root, rel, table)
    frame = pl.from_arrow(table.select(["event_id", "time", "delegation_id",
                                        "delegation_parent_id", "principal_user_id",
                                        "agent_id", "agent_instance_id", "event_kind",
                                        "delegation_binding"]))
    assert isinstance(frame, pl.DataFrame)
    side = side_table(frame.with_columns(pl.lit(workflow).alias("workflow"),
                                         pl.lit(rel).alias("file")))
    dw = DelegationWriter(root)
    dw.write(side)
    dw.close()
    write_manifest(root, {"producer": "write_store", "n_events": table.num_rows,
                          "parquet_bytes": size, **(manifest or {})})
    writer.commit_dir(root, final, "cim-store", force=False)
    return final
