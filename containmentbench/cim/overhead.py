"""Operational overhead of CIM (paper 002 §7.4, Table 6).

* Gateway latency: the time the gateway adds to one tool call — delegation binding and
  validation, semantic normalization (``Gateway.bind``) and emission of the CIM row into the
  columnar buffer (``CimEmitter.emit``) — measured side by side with the tool call alone
  (a real sandbox tool on a real scenario world), interleaved in one loop so both see the
  same machine state. Flushing the buffer to Arrow is batched; its cost per event is
  reported separately as amortized.
* Bytes/event: each event projected to the baseline field set vs the CIM field set
  (schema.BASELINE_FIELDS / CIM_FIELDS), as compressed Parquet with the store's writer
  options and, for comparison with the paper's 341/588 bytes, as compact JSON.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pyarrow as pa

from containmentbench.cim.project import EPOCH_US, TICK_US, TOOL_FAMILY, span_id_of, trace_id_of
from containmentbench.cim.schema import (
    BASELINE_FIELDS,
    CIM_EVENTS,
    CIM_FIELDS,
    conform,
    parquet_options,
)
from containmentbench.integrity import writer

_COLS = CIM_EVENTS.names


class CimEmitter:
    """Appends gateway-bound CIM rows to column buffers; ``flush`` makes an Arrow table."""

    __slots__ = ("buf", "last_span", "n", "rollout_id")

    def __init__(self, rollout_id: str) -> None:
        self.rollout_id = rollout_id
        self.buf: dict[str, list[Any]] = {c: [] for c in _COLS}
        self.last_span: dict[str, str] = {}
        self.n = 0

    def emit(self, bound: dict[str, Any], agent_id: str, instance: str, tool: str,
             tick: int, call_id: str) -> None:
        rid, seq = self.rollout_id, self.n
        span = span_id_of(rid, seq)
        b = self.buf
        b["time"].append(EPOCH_US + tick * TICK_US)
        b["event_id"].append(f"{rid}:{seq}")
        b["delegation_id"].append(bound["delegation_id"])
        b["delegation_parent_id"].append(bound["delegation_parent_id"])
        b["principal_user_id"].append(bound["principal_id"])
        b["agent_id"].append(agent_id)
        b["agent_instance_id"].append(instance)
        b["tool_name"].append(TOOL_FAMILY[tool])
        b["tool_operation"].append(tool)
        b["action_semantic"].append(bound["action_semantic"])
        b["action_outcome"].append(None)
        b["direction"].append(bound["direction"])
        b["principal_scope"].append(bound["principal_scope"])
        b["resource_class"].append(bound["resource_class"])
        b["resource_id"].append(bound["resource_id"])
        b["resource_uri"].append(None)
        b["sensitivity_label"].append(bound["sensitivity_label"])
        b["target_principal_id"].append(bound["target_principal"])
        b["trace_id"].append(trace_id_of(rid, instance))
        b["span_id"].append(span)
        b["parent_span_id"].append(self.last_span.get(instance))
        b["workflow_id"].append(rid)
        b["labels"].append(None)
        b["event_kind"].append("proposal")
        b["delegation_binding"].append(bound["binding"])
        b["call_id"].append(call_id)
        b["session_id"].append(f"{rid}/s1")
        b["agent_hints"].append(bound["agent_hints"])
        b["integrity"].append(bound["integrity"])
        b["capture"].append("gateway")
        b["covered"].append(True)
        b["gt_delegation_id"].append(bound["delegation_id"])
        self.last_span[instance] = span
        self.n += 1

    def flush(self) -> pa.Table:
        table = conform(self.buf)
        self.buf = {c: [] for c in _COLS}
        return table


def _world() -> tuple[Any, Any, list[tuple[str, dict[str, Any]]]]:
    from containmentbench.gateway.gateway import Gateway
    from containmentbench.sandbox.world import World
    from containmentbench.scenarios.manifest import load_suite

    scen = next(s for s in load_suite("smoke")
                if s.initial_state["documents"] and s.initial_state["emails"]
                and s.initial_state["crm"])
    world = World.from_spec(scen.initial_state)
    gw = Gateway("bench", scen.initial_state["principal"]["user_id"], world,
                 scen.authorization["org_domain"])
    doc = next(iter(world.documents))
    mail = next(iter(world.emails))
    crm = next(iter(world.crm))
    contact = next(iter(world.contacts.values())).email
    calls = [("read_document", {"doc_id": doc}), ("read_email", {"email_id": mail}),
             ("search_documents", {"query": "report"}), ("crm_lookup", {"contact_id": crm}),
             ("search_email", {"query": "meeting"}),
             ("send_email", {"to": [contact], "subject": "s", "body": "b"})]
    return world, gw, calls


def gateway_latency(n: int = 20_000, warmup: int = 2_000, flush_every: int = 4_096
                    ) -> dict[str, float]:
    """p50/p95 (microseconds) of the tool call alone and of what the gateway adds."""
    from containmentbench.sandbox.tools import TOOLS

    world, gw, calls = _world()
    d = gw.mint("agent", "agent#1", None, 0)
    em = CimEmitter("r-bench")
    tool_ns = np.empty(n, dtype=np.int64)
    gate_ns = np.empty(n, dtype=np.int64)
    flush_ns = 0
    flushed = 0
    clock = time.perf_counter_ns
    em.emit(gw.bind(d.delegation_id, "agent", "agent#1", *calls[0]), "agent", "agent#1",
            calls[0][0], 0, "c0")
    em.flush()  # one-time Arrow initialization stays out of the amortized figure
    for i in range(-warmup, n):
        tool, args = calls[i % len(calls)]
        spec = TOOLS[tool]
        t0 = clock()
        if spec.run is not None:
            spec.run(world, args)
        else:
            spec.stage(world, args).apply(world)
        t1 = clock()
        bound = gw.bind(d.delegation_id, "agent", "agent#1", tool, args)
        em.emit(bound, "agent", "agent#1", tool, i + warmup, f"c{i}")
        t2 = clock()
        if i >= 0:
            tool_ns[i] = t1 - t0
            gate_ns[i] = t2 - t1
        if em.n % flush_every == 0:
            t3 = clock()
            em.flush()
            flush_ns += clock() - t3
            flushed += flush_every
        if tool == "send_email":
            world.outbox.clear()
    t3 = clock()
    rest = em.n - flushed
    em.flush()
    flush_ns += clock() - t3
    flushed += rest
    us = 1e-3
    return {"n_calls": n,
            "tool_p50_us": float(np.percentile(tool_ns, 50)) * us,
            "tool_p95_us": float(np.percentile(tool_ns, 95)) * us,
            "gateway_p50_us": float(np.percentile(gate_ns, 50)) * us,
            "gateway_p95_us": float(np.percentile(gate_ns, 95)) * us,
            "flush_amortized_us": flush_ns * us / max(flushed, 1)}


def parquet_bytes(table: pa.Table, names: tuple[str, ...]) -> int:
    sub = table.select(list(names))
    return len(writer.parquet_bytes(sub, **parquet_options(list(names))))


def json_bytes(table: pa.Table, names: tuple[str, ...]) -> int:
    total = 0
    for row in table.select(list(names)).to_pylist():
        row = {k: (v.isoformat() if hasattr(v, "isoformat") else v)
               for k, v in row.items() if v is not None}
        total += len(json.dumps(row, separators=(",", ":")).encode()) + 1
    return total


def bytes_per_event(table: pa.Table, json_sample: int = 20_000) -> dict[str, float]:
    """Table 6 bytes/event: baseline vs CIM field sets, Parquet (all rows) and JSON (sample)."""
    n = max(table.num_rows, 1)
    sample = table.slice(0, min(json_sample, table.num_rows))
    m = max(sample.num_rows, 1)
    out = {"n_events": table.num_rows,
           "parquet_baseline": parquet_bytes(table, BASELINE_FIELDS) / n,
           "parquet_cim": parquet_bytes(table, CIM_FIELDS) / n,
           "json_baseline": json_bytes(sample, BASELINE_FIELDS) / m,
           "json_cim": json_bytes(sample, CIM_FIELDS) / m}
    out["parquet_delta"] = out["parquet_cim"] - out["parquet_baseline"]
    out["json_delta"] = out["json_cim"] - out["json_baseline"]
    return out
