"""Projection of rollout trace events to CIM rows (paper 002 Appendix B.1, Table 8).

Which events: the gateway-emitted kinds (``proposal`` for every call that reached the
gateway, ``commit``, ``delegate`` for each minting, ``spawn``, ``message``), plus approved
confirmations as ``approval`` rows (an authority-expansion event, §5.4; their delegation
fields are copied from the proposal with the same call id). The projection is lossless for
the gateway-bound fields: ``unproject`` recovers every column in ``PROJECTED`` (tested).

Derived fields, all deterministic:

* ``time`` = 2026-01-01T00:00:00Z + ``tick`` x ``tick_us`` (the logical clock, never wall
  time). All rollouts of an export share the epoch: they are treated as concurrent
  delegations, the overlap regime of §7.1.
* Trace context (§4.2 "workflow correlation identifiers"): each agent instance is its own
  runtime and so its own trace, ``trace_id`` = sha256(rollout_id, instance)[:32]; each
  event is a span, ``span_id`` = sha256(rollout_id)[:8] + seq as 8 hex digits (W3C-valid,
  compressible); ``parent_span_id`` = the previous projected event of the same instance.
  A supervisor-worker delegation therefore spans two traces: the fragmentation of §5.3.
* ``tool_name`` = the tool family of ``TOOL_FAMILY``; ``tool_operation`` keeps the sandbox
  tool name; rows emitted by the gateway itself (minting, spawn) use ``gateway``.
* ``agent_instance_id`` = rollout id + ``/`` + the trace's instance (instance names such
  as ``worker#1.2`` are only unique within a rollout; Table 8 wants a concrete instance);
* ``workflow_id`` = rollout id; ``session_id`` = rollout id + ``/s`` + session number;
  ``labels['target']`` keeps the trace's ``target``; ``gt_delegation_id`` is the delegation
  the gateway minted for the acting instance (the ground truth even for unbound rows).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import polars as pl
import pyarrow as pa

from containmentbench.cim.schema import CIM_EVENTS, conform

GATEWAY_KINDS = ("proposal", "commit", "delegate", "spawn", "message")
EPOCH_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
TICK_US = 1_000_000

# Sandbox tool -> tool family (Table 8 tool.name); every sandbox tool must appear (tested).
TOOL_FAMILY: dict[str, str] = {
    "search_email": "email", "read_email": "email", "send_email": "email",
    "draft_email": "email", "search_documents": "docs", "read_document": "docs",
    "share_document": "docs", "lookup_contact": "crm", "crm_lookup": "crm",
    "update_crm": "crm", "list_calendar": "calendar", "create_event": "calendar",
    "send_invite": "calendar", "read_messages": "messaging", "post_status_note": "messaging",
    "memory_read": "memory", "memory_list": "memory", "memory_write": "memory",
    "memory_scrub": "memory", "memory_quarantine": "memory", "write_task_record": "tasks",
    "rollback": "recovery", "delegate": "agents", "handoff": "agents",
}
KIND_TOOL = {"delegate": "gateway", "spawn": "gateway", "message": "agents",
             "approval": "gateway"}

# Trace columns the projection must preserve for gateway kinds.
PROJECTED = ("rollout_id", "seq", "event_id", "kind", "session", "tick", "agent_id",
             "agent_instance", "delegation_id", "delegation_parent_id", "principal_id",
             "binding", "call_id", "tool", "action_semantic", "direction", "resource_class",
             "resource_id", "sensitivity_label", "principal_scope", "target_principal",
             "target", "outcome", "agent_hints", "integrity")


def _hex(*parts: Any, n: int) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:n]


def trace_id_of(rollout_id: str, instance: str) -> str:
    return _hex(rollout_id, instance, n=32)


def span_id_of(rollout_id: str, seq: int) -> str:
    return _hex(rollout_id, n=8) + f"{seq:08x}"


def _approvals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Approved confirmations as approval rows carrying their proposal's delegation."""
    props = {(r["rollout_id"], r["call_id"]): r for r in rows if r["kind"] == "proposal"}
    out = []
    for r in rows:
        if r["kind"] != "confirmation" or r.get("decision") != "approved":
            continue
        p = props.get((r["rollout_id"], r["call_id"]))
        if p is None:
            continue
        a = {k: p[k] for k in ("agent_id", "agent_instance", "delegation_id",
                                "delegation_parent_id", "principal_id", "binding")}
        a.update(rollout_id=r["rollout_id"], seq=r["seq"], event_id=r["event_id"],
                 kind="approval", session=r["session"], tick=r["tick"], call_id=r["call_id"],
                 tool=None, action_semantic="delegate", direction=None,
                 resource_class="delegation", resource_id=p["delegation_id"],
                 sensitivity_label=None, principal_scope=None, target_principal=None,
                 target=None, outcome="success", agent_hints=None, integrity=None)
        out.append(a)
    return out


def project_rows(rows: Iterable[dict[str, Any]], topology: dict[str, str] | None = None,
                 tick_us: int = TICK_US) -> tuple[pa.Table, list[str]]:
    """CIM rows (emission order: rollout, seq) and each row's workflow (topology)."""
    rows = list(rows)
    keep = [r for r in rows if r["kind"] in GATEWAY_KINDS]
    keep += _approvals(rows)
    keep.sort(key=lambda r: (r["rollout_id"], r["seq"]))
    minted = {(r["rollout_id"], r["agent_instance"]): r["resource_id"]
              for r in keep if r["kind"] == "delegate"}
    cols: dict[str, list[Any]] = {f.name: [] for f in CIM_EVENTS}
    workflows: list[str] = []
    last_span: dict[tuple[str, str], str] = {}
    for r in keep:
        rid, inst, seq = r["rollout_id"], r["agent_instance"], int(r["seq"])
        span = span_id_of(rid, seq)
        key = (rid, inst)
        tool = r["tool"]
        labels = [("target", r["target"])] if r.get("target") is not None else None
        values = {
            "time": EPOCH_US + int(r["tick"]) * tick_us,
            "event_id": r["event_id"], "delegation_id": r["delegation_id"],
            "delegation_parent_id": r["delegation_parent_id"],
            "principal_user_id": r["principal_id"], "agent_id": r["agent_id"],
            "agent_instance_id": f"{rid}/{inst}" if inst is not None else None,
            "tool_name": TOOL_FAMILY.get(tool, tool) if tool else KIND_TOOL[r["kind"]],
            "tool_operation": tool, "action_semantic": r["action_semantic"],
            "action_outcome": r["outcome"], "direction": r["direction"],
            "principal_scope": r["principal_scope"], "resource_class": r["resource_class"],
            "resource_id": r["resource_id"], "resource_uri": None,
            "sensitivity_label": r["sensitivity_label"],
            "target_principal_id": r["target_principal"],
            "trace_id": trace_id_of(rid, inst), "span_id": span,
            "parent_span_id": last_span.get(key), "workflow_id": rid, "labels": labels,
            "event_kind": r["kind"], "delegation_binding": r["binding"] or "unbound",
            "call_id": r["call_id"], "session_id": f"{rid}/s{int(r['session'])}",
            "agent_hints": r["agent_hints"], "integrity": r["integrity"],
            "capture": "gateway", "covered": True,
            "gt_delegation_id": minted.get(key, r["delegation_id"]),
        }
        last_span[key] = span
        for k, v in values.items():
            cols[k].append(v)
        workflows.append((topology or {}).get(rid, "rollout"))
    return conform(cols), workflows


def project_events(events: pa.Table, rollouts: pa.Table | None = None,
                   tick_us: int = TICK_US) -> tuple[pa.Table, list[str]]:
    """Project a trace ``events`` table (and ``rollouts`` for the topology) to CIM."""
    topo = None
    if rollouts is not None:
        topo = dict(zip(rollouts.column("rollout_id").to_pylist(),
                        rollouts.column("topology").to_pylist()))
    return project_rows(events.to_pylist(), topo, tick_us)


def unproject(cim: pl.DataFrame, tick_us: int = TICK_US) -> pl.DataFrame:
    """Trace columns of ``PROJECTED`` recovered from CIM rows of gateway kinds."""
    df = cim.filter(pl.col("event_kind").is_in(GATEWAY_KINDS))
    target = df["labels"].to_list()
    return pl.DataFrame({
        "rollout_id": df["workflow_id"],
        "seq": df["event_id"].str.split(":").list.last().cast(pl.Int32),
        "event_id": df["event_id"], "kind": df["event_kind"],
        "session": df["session_id"].str.split("/s").list.last().cast(pl.Int8),
        "tick": ((df["time"].dt.epoch("us") - EPOCH_US) // tick_us).cast(pl.Int32),
        "agent_id": df["agent_id"],
        "agent_instance": df["agent_instance_id"].str.slice(df["workflow_id"].str.len_chars()
                                                            + 1),
        "delegation_id": df["delegation_id"],
        "delegation_parent_id": df["delegation_parent_id"],
        "principal_id": df["principal_user_id"], "binding": df["delegation_binding"],
        "call_id": df["call_id"], "tool": df["tool_operation"],
        "action_semantic": df["action_semantic"], "direction": df["direction"],
        "resource_class": df["resource_class"], "resource_id": df["resource_id"],
        "sensitivity_label": df["sensitivity_label"],
        "principal_scope": df["principal_scope"],
        "target_principal": df["target_principal_id"],
        "target": [_label(t, "target") for t in target],
        "outcome": df["action_outcome"], "agent_hints": df["agent_hints"],
        "integrity": df["integrity"],
    })


def _label(labels: Any, key: str) -> str | None:
    if not labels:
        return None
    if isinstance(labels, dict) and "key" not in labels:  # polars may map Arrow maps to dicts
        return labels.get(key)
    for item in labels:
        k, v = (item["key"], item["value"]) if isinstance(item, dict) else item
        if k == key:
            return v
    return None
