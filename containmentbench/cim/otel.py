"""OpenTelemetry-compatible JSON export of CIM rows (OTLP/JSON ``resourceSpans``).

Paper 002 §2.4: carrying a delegation id in OTel attributes is a transport, not a model;
neither OTel GenAI nor OCSF defines a delegation id. Each CIM row becomes one span:

* resource = one agent runtime (``service.name``, ``service.instance.id`` = the agent
  instance), so spans group as the runtimes that emitted them;
* OTel GenAI attributes: ``gen_ai.operation.name`` (``execute_tool`` for tool calls,
  ``create_agent`` for minting and spawn, ``invoke_agent`` for messages,
  ``approve_delegation`` for approvals), ``gen_ai.agent.id`` and ``gen_ai.agent.name``
  (Table 8 ``agent.agent_id``), ``gen_ai.tool.name`` (the tool-native name invoked) and
  ``gen_ai.tool.call.id``;
* the ``delegation.*`` extension namespace: ``delegation.id``, ``delegation.parent_id``,
  ``delegation.binding`` (bound | unbound, §6 (d)), ``delegation.principal.user_id``,
  ``delegation.integrity`` (string array, App. C.3), ``delegation.agent_hints`` (untrusted);
* the ``cim.*`` namespace for the remaining Table 8 fields under their dotted names
  (``cim.action.semantic``, ``cim.action.tier2.direction``, ``cim.resource.type``,
  ``cim.resource.sensitivity_label``, ``cim.target.principal_id``, ...), ``cim.labels.<k>``
  for labels, and ``cim.trace.synthetic`` when a row had no trace context (OTLP requires
  ids, so they are derived from the event id and marked so the import restores nulls).

``from_otlp`` inverts the export exactly (tested), so the JSON is a lossless CIM carrier.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from containmentbench.canonical import short_id
from containmentbench.cim.schema import CIM_EVENTS, CIM_VERSION, conform
from containmentbench.integrity import writer

OPERATION = {"proposal": "execute_tool", "commit": "execute_tool", "delegate": "create_agent",
             "spawn": "create_agent", "message": "invoke_agent",
             "approval": "approve_delegation"}
SPAN_KIND = {"proposal": 3, "commit": 3}  # CLIENT for outgoing tool calls, else INTERNAL
STATUS = {"success": 1, "failure": 2}

# CIM column -> attribute key (strings unless noted).
ATTRS: dict[str, str] = {
    "delegation_id": "delegation.id", "delegation_parent_id": "delegation.parent_id",
    "delegation_binding": "delegation.binding",
    "principal_user_id": "delegation.principal.user_id",
    "agent_hints": "delegation.agent_hints", "integrity": "delegation.integrity",
    "event_id": "cim.event.id", "event_kind": "cim.event.kind",
    "tool_name": "cim.tool.name", "tool_operation": "cim.tool.operation",
    "action_semantic": "cim.action.semantic", "action_outcome": "cim.action.outcome",
    "direction": "cim.action.tier2.direction",
    "principal_scope": "cim.action.tier2.principal_scope",
    "resource_class": "cim.resource.type", "resource_id": "cim.resource.id",
    "resource_uri": "cim.resource.uri", "sensitivity_label": "cim.resource.sensitivity_label",
    "target_principal_id": "cim.target.principal_id", "workflow_id": "cim.workflow.id",
    "session_id": "cim.session.id", "call_id": "gen_ai.tool.call.id",
    "capture": "cim.capture", "covered": "cim.covered",
    "gt_delegation_id": "cim.eval.gt_delegation_id",
}
_BY_KEY = {v: k for k, v in ATTRS.items()}


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
    return {"stringValue": str(v)}


def _unvalue(v: dict[str, Any]) -> Any:
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [x["stringValue"] for x in v["arrayValue"].get("values", [])]
    return v["stringValue"]


def _nanos(t: datetime) -> str:
    us = int(t.timestamp()) * 1_000_000 + t.microsecond
    return str(us * 1000)


def to_span(row: dict[str, Any]) -> dict[str, Any]:
    kind = row["event_kind"]
    attrs = [{"key": "gen_ai.operation.name", "value": _value(OPERATION[kind])},
             {"key": "gen_ai.agent.id", "value": _value(row["agent_id"])},
             {"key": "gen_ai.agent.name", "value": _value(row["agent_id"])}]
    tool = row["tool_operation"] or row["tool_name"]
    attrs.append({"key": "gen_ai.tool.name", "value": _value(tool)})
    for col, key in ATTRS.items():
        if row.get(col) is not None:
            attrs.append({"key": key, "value": _value(row[col])})
    for k, v in row.get("labels") or []:
        attrs.append({"key": f"cim.labels.{k}", "value": _value(v)})
    trace, span = row["trace_id"], row["span_id"]
    if trace is None or span is None:
        trace = short_id("trace", row["event_id"], n=32)
        span = short_id("span", row["event_id"], n=16)
        attrs.append({"key": "cim.trace.synthetic", "value": _value(True)})
    t = _nanos(row["time"])
    out = {"traceId": trace, "spanId": span, "name": f"{OPERATION[kind]} {tool}",
           "kind": SPAN_KIND.get(kind, 1), "startTimeUnixNano": t, "endTimeUnixNano": t,
           "attributes": attrs, "status": {"code": STATUS.get(row["action_outcome"], 0)}}
    if row["parent_span_id"] is not None:
        out["parentSpanId"] = row["parent_span_id"]
    return out


def to_otlp(table: pa.Table) -> dict[str, Any]:
    """OTLP/JSON document: one resourceSpans entry per agent runtime instance."""
    groups: dict[tuple[str, str | None], list[dict[str, Any]]] = defaultdict(list)
    for row in table.select(CIM_EVENTS.names).to_pylist():
        groups[(row["agent_id"], row["agent_instance_id"])].append(to_span(row))
    resource_spans = []
    for (agent, inst), spans in groups.items():
        res = [{"key": "service.name", "value": _value("containmentbench-agent-runtime")},
               {"key": "gen_ai.agent.id", "value": _value(agent)}]
        if inst is not None:
            res.append({"key": "service.instance.id", "value": _value(inst)})
        resource_spans.append({
            "resource": {"attributes": res},
            "scopeSpans": [{"scope": {"name": "containmentbench.cim", "version": CIM_VERSION},
                            "spans": spans}]})
    return {"resourceSpans": resource_spans}


def from_otlp(doc: dict[str, Any]) -> pa.Table:
    """CIM rows back from an OTLP/JSON document written by ``to_otlp``."""
    cols: dict[str, list[Any]] = {f.name: [] for f in CIM_EVENTS}
    for rs in doc["resourceSpans"]:
        res = {a["key"]: _unvalue(a["value"]) for a in rs["resource"]["attributes"]}
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                a = {x["key"]: _unvalue(x["value"]) for x in sp["attributes"]}
                synthetic = a.get("cim.trace.synthetic", False)
                row: dict[str, Any] = {col: a.get(key) for key, col in _BY_KEY.items()}
                row["agent_id"] = a["gen_ai.agent.id"]
                row["agent_instance_id"] = res.get("service.instance.id")
                row["time"] = int(sp["startTimeUnixNano"]) // 1000  # microseconds
                row["trace_id"] = None if synthetic else sp["traceId"]
                row["span_id"] = None if synthetic else sp["spanId"]
                row["parent_span_id"] = sp.get("parentSpanId")
                labels = [(k[len("cim.labels."):], v) for k, v in a.items()
                          if k.startswith("cim.labels.")]
                row["labels"] = labels or None
                for f in CIM_EVENTS:
                    cols[f.name].append(row.get(f.name))
    return conform(cols)


def write_otlp(table: pa.Table, path: Path) -> int:
    data = json.dumps(to_otlp(table), separators=(",", ":"))
    writer.build_text(path, data)  # inside the store under construction (seal.py)
    return len(data)
