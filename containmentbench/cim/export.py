"""``cim export``: rollout trace shards -> a CIM store (Parquet) and/or OTLP/JSON.

The store uses the same layout as generated telemetry (store.py), partitioned by the
rollout topology as the workflow (``single``, ``supervisor_worker``, ``peer_chain``), so every
query, baseline and report runs unchanged on both. Rows keep emission order (rollout, seq),
which is also the order the optional hash chain covers (chain.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.cim.chain import add_chain
from containmentbench.cim.otel import MAX_BYTES, write_otlp
from containmentbench.cim.project import TICK_US, project_events
from containmentbench.cim.schema import validate
from containmentbench.cim.seal import begin_store, finish_store, seal_manifest
from containmentbench.cim.store import (
    DelegationWriter,
    partition_path,
    side_table,
    write_events,
    write_manifest,
)
from containmentbench.errors import BenchError
from containmentbench.integrity.keys import load_key
from containmentbench.trace.io import read_shards, shard_dirs


@dataclass(frozen=True, slots=True)
class ExportSummary:
    out: Path
    n_trace_events: int
    n_cim_events: int
    n_delegations: int
    n_unbound: int
    parquet_bytes: int
    otel_bytes: int
    otel_spans: int = 0


def export_traces(traces: Path, out: Path, *, parquet: bool = True, otel: bool = False,
                  chain: bool = False, tick_us: int = TICK_US, force: bool = False,
                  otel_proto: bool = False, otel_max_bytes: int = MAX_BYTES
                  ) -> ExportSummary:
    if not shard_dirs(traces):
        raise BenchError("no finished trace shards (folders with SHA256SUMS) below this path",
                         file=str(traces))
    events = read_shards(traces, "events")
    rollouts = read_shards(traces, "rollouts")
    cim, workflows = project_events(events, rollouts, tick_us)
    validate(cim, str(traces))
    ids = cim.column("event_id").to_pylist()
    if len(set(ids)) != len(ids):
        raise BenchError("duplicate event ids across shards (the same rollout exported twice?)",
                         file=str(traces), field="event_id")
    if not (parquet or otel):
        raise BenchError("nothing to export: choose parquet and/or otel", field="format")
    key = load_key(out) if chain else None
    final, out = out, begin_store(out, force)  # never deletes: see cim/seal.py
    if not parquet:
        o = write_otlp(cim, out / "otel", max_bytes=otel_max_bytes, proto=otel_proto)
        finish_store(out, final, force)
        return ExportSummary(final, events.num_rows, cim.num_rows, 0, _unbound(cim), 0,
                             o["json_bytes"], o["n_spans"])
    wf = pa.array(workflows, pa.string())
    pbytes = 0
    heads: dict[str, str] = {}
    frames = []
    for w in sorted(set(workflows)):
        part = cim.filter(pc.equal(wf, w))
        rel = partition_path(w, 0, 0)
        if chain:
            part = add_chain(part, key)
            heads[rel] = part.column("chain_hash")[-1].as_py()
        pbytes += write_events(out, rel, part)
        frames.append(pl.from_arrow(part.select(["event_id", "time", "delegation_id",
                                                 "delegation_parent_id", "principal_user_id",
                                                 "agent_id", "agent_instance_id", "event_kind",
                                                 "delegation_binding"]))
                      .with_columns(pl.lit(w).alias("workflow"), pl.lit(rel).alias("file")))
    side = side_table(pl.concat(frames))
    dw = DelegationWriter(out)
    dw.write(side)
    dw.close()
    o = write_otlp(cim, out / "otel", max_bytes=otel_max_bytes, proto=otel_proto) if otel \
        else {"json_bytes": 0, "proto_bytes": 0, "n_spans": 0}
    obytes = o["json_bytes"]
    n_unbound = _unbound(cim)
    write_manifest(out, seal_manifest({
        "producer": "cim export", "source": str(traces), "tick_us": tick_us,
        "n_trace_events": events.num_rows, "n_events": cim.num_rows,
        "n_delegations": side.num_rows, "n_unbound": n_unbound, "chain": chain,
        "chain_heads": heads, "parquet_bytes": pbytes, "otel_bytes": obytes,
        "otel_proto_bytes": o["proto_bytes"], "otel_spans": o["n_spans"],
        "bytes_per_event": round(pbytes / max(cim.num_rows, 1), 2)}, sorted(heads), key))
    finish_store(out, final, force)
    return ExportSummary(final, events.num_rows, cim.num_rows, side.num_rows, n_unbound, pbytes,
                         obytes, o["n_spans"])


def _unbound(cim: pa.Table) -> int:
    return sum(1 for b in cim.column("delegation_binding").to_pylist() if b != "bound")
