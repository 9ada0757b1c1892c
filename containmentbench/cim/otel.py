"""CIM rows as OpenTelemetry traces and logs (OTLP/JSON, optional OTLP protobuf).

Paper 002 §2.4: a delegation id in OTel attributes is a transport, not a model, and neither
the OTel GenAI conventions nor OCSF define one; so CIM rides on OTel as extension
attributes while the spans follow the GenAI conventions a collector and a trace viewer know:

* one span per tool call (``execute_tool <tool>``) and one per agent run (``invoke_agent
  <agent>``), kind INTERNAL (in-process tool execution and agents); the other rows of a
  span (a call's commit, its approval, the delegating message; an agent's spawn and
  messages) are span events ``cim.row`` carrying what differs from the span's own row, and a
  proposal's policy decision is a span event ``cim.decision`` and an OTLP log record;
* start/end = the first and last row of the span (a call from its proposal to its commit,
  an agent from its minting to its last message); parent = the calling agent's span (the
  projection's tree, project.py); a sub-agent's span links to its parent delegation's agent
  span (``delegation.link = parent``), so the two stay related even in separate traces;
* attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.agent.id`` and
  ``.name``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``; ``delegation.*`` (id, parent id,
  binding, principal, integrity, agent hints); the rest of Table 8 as ``cim.<dotted name>``.
  Evaluation-only ground truth (``capture``, ``covered``, ``gt_delegation_id``) is never
  exported: it stays in the Parquet store;
* resource = one agent runtime (``service.name``, ``service.instance.id``);
* documents are cut into batches of at most ``max_bytes`` of compact JSON, one OTLP export
  request per file (``traces-00000.json``, ``logs-00000.json``); ids are hex as OTLP/JSON
  requires. With ``opentelemetry-proto`` installed (extra ``otel``) the same requests are
  also written as protobuf (``.binpb``), the wire format a collector's OTLP/HTTP receiver
  takes (tests post them to one on 127.0.0.1).

``from_otlp`` inverts the export for every non-evaluation column (tested), and names the
file, span and field of anything malformed.
"""

from __future__ import annotations

import base64
import copy
import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa

from containmentbench.canonical import short_id
from containmentbench.cim.project import label
from containmentbench.cim.schema import CIM_EVENTS, CIM_VERSION, EVALUATION, conform
from containmentbench.errors import BenchError

INTERNAL, OK, ERROR = 1, 1, 2
PRIMARY = ("proposal", "delegate")
EVAL = {f.name for f in EVALUATION}
MAX_BYTES = 4 << 20
#: the largest OTLP/JSON file ``cim import`` reads (an export cuts files at MAX_BYTES)
MAX_IMPORT_BYTES = 256 << 20
SEVERITY = {"allow": (9, "INFO"), "confirm": (13, "WARN"), "block": (13, "WARN")}
OPERATION = {"proposal": "execute_tool", "commit": "execute_tool", "approval": "execute_tool",
             "delegate": "invoke_agent", "spawn": "invoke_agent", "message": "invoke_agent"}

# CIM column -> attribute key (strings unless noted); agent id and tool are gen_ai.*.
ATTRS: dict[str, str] = {
    "delegation_id": "delegation.id", "delegation_parent_id": "delegation.parent_id",
    "delegation_binding": "delegation.binding",
    "principal_user_id": "delegation.principal.user_id",
    "agent_hints": "delegation.agent_hints", "integrity": "delegation.integrity",
    "agent_id": "gen_ai.agent.id", "call_id": "gen_ai.tool.call.id",
    "event_id": "cim.event.id", "event_kind": "cim.event.kind",
    "agent_instance_id": "cim.agent.instance_id",
    "tool_name": "cim.tool.name", "tool_operation": "cim.tool.operation",
    "action_semantic": "cim.action.semantic", "action_outcome": "cim.action.outcome",
    "direction": "cim.action.tier2.direction",
    "principal_scope": "cim.action.tier2.principal_scope",
    "resource_class": "cim.resource.type", "resource_id": "cim.resource.id",
    "resource_uri": "cim.resource.uri", "sensitivity_label": "cim.resource.sensitivity_label",
    "target_principal_id": "cim.target.principal_id", "workflow_id": "cim.workflow.id",
    "session_id": "cim.session.id", "parent_span_id": "cim.parent_span_id",
}
_BY_KEY = {v: k for k, v in ATTRS.items()}
REQUIRED_ATTRS = ("cim.event.id", "cim.event.kind", "gen_ai.agent.id", "cim.tool.name",
                  "cim.action.semantic", "delegation.binding")


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
    return {"stringValue": str(v)}


def _unvalue(v: dict[str, Any], where: str) -> Any:
    if not isinstance(v, dict):
        raise BenchError(f"{where}: attribute value is not an AnyValue object", field=where)
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:  # shapes checked first (otlp_shape.py): values are AnyValues
        return [x.get("stringValue") for x in v["arrayValue"].get("values", [])]
    if "stringValue" in v:
        return v["stringValue"]
    raise BenchError(f"{where}: unsupported attribute value {sorted(v)}", field=where)


def _kv(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in d.items()]


def _nanos(t: datetime) -> int:
    return (int(t.timestamp()) * 1_000_000 + t.microsecond) * 1000


def _labels(row: dict[str, Any]) -> list[tuple[str, str]]:
    return [tuple(x) for x in (row.get("labels") or [])]


def _row_attrs(row: dict[str, Any]) -> dict[str, Any]:
    out = {ATTRS[c]: row[c] for c in ATTRS if row.get(c) is not None and c != "parent_span_id"}
    out.update({f"cim.labels.{k}": v for k, v in _labels(row)})
    return out


def _diff(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Attributes of a secondary row: what differs from the span's own row (nulls listed)."""
    out: dict[str, Any] = {}
    nulls = []
    for c, key in ATTRS.items():
        if row.get(c) != base.get(c):
            if row.get(c) is None:
                nulls.append(c)
            else:
                out[key] = row[c]
    if _labels(row) != _labels(base):
        out["cim.labels"] = json.dumps(_labels(row))
    if nulls:
        out["cim.null"] = nulls
    return out


def _spans(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["trace_id"] is None or r["span_id"] is None:
            r = {**r, "trace_id": short_id("trace", r["event_id"], n=32),
                 "span_id": short_id("span", r["event_id"], n=16), "_synthetic": True}
        groups[(r["trace_id"], r["span_id"])].append(r)
    out = []
    for members in groups.values():
        primary = next((m for m in members if m["event_kind"] in PRIMARY), members[0])
        out.append((primary, members))
    return out


def to_otlp(table: pa.Table, max_bytes: int = MAX_BYTES
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """OTLP/JSON trace export requests and log export requests, each at most ``max_bytes``
    of compact JSON (a single span larger than that gets a request of its own)."""
    rows = table.select([c for c in CIM_EVENTS.names if c not in EVAL]).to_pylist()
    spans = _spans(rows)
    agent_span = {p["delegation_id"]: (p["trace_id"], p["span_id"]) for p, _ in spans
                  if p["event_kind"] == "delegate" and p["delegation_id"] is not None}
    by_res: dict[tuple[str, str | None], list[dict[str, Any]]] = defaultdict(list)
    logs: dict[tuple[str, str | None], list[dict[str, Any]]] = defaultdict(list)
    for primary, members in spans:
        res = (primary["agent_id"], primary["agent_instance_id"])
        by_res[res].append(_span(primary, members, agent_span))
        logs[res] += _decision_logs(primary, members)
    return (_batches(by_res, "resourceSpans", "scopeSpans", "spans", max_bytes),
            _batches(logs, "resourceLogs", "scopeLogs", "logRecords", max_bytes))


def _span(p: dict[str, Any], members: list[dict[str, Any]],
          agent_span: dict[str, tuple[str, str]]) -> dict[str, Any]:
    kind = p["event_kind"]
    op = OPERATION.get(kind, "execute_tool")
    tool = p["tool_operation"] or p["tool_name"]
    attrs: dict[str, Any] = {"gen_ai.operation.name": op, "gen_ai.agent.name": p["agent_id"]}
    provider = label(p.get("labels"), "provider")
    if provider:
        attrs["gen_ai.provider.name"] = provider
    if op == "execute_tool":
        attrs["gen_ai.tool.name"] = tool
    attrs.update(_row_attrs(p))
    if p.get("_synthetic"):
        attrs["cim.trace.synthetic"] = True
    times = [_nanos(m["time"]) for m in members]
    start, t0 = min(times), _nanos(p["time"])
    if t0 != start:
        attrs["cim.time_unix_nano"] = str(t0)
    events = []
    for m in members:
        if m is not p:
            events.append({"timeUnixNano": str(_nanos(m["time"])), "name": "cim.row",
                           "attributes": _kv(_diff(m, p))})
    decision = label(p.get("labels"), "decision")
    if kind == "proposal" and decision:
        events.append({"timeUnixNano": str(t0), "name": "cim.decision",
                       "attributes": _kv({"decision": decision,
                                          **({"rule_id": label(p["labels"], "rule_id")}
                                             if label(p["labels"], "rule_id") else {})})})
    name = f"{op} {p['agent_id'] if op == 'invoke_agent' else tool}"
    span: dict[str, Any] = {"traceId": p["trace_id"], "spanId": p["span_id"], "name": name,
                            "kind": INTERNAL, "startTimeUnixNano": str(start),
                            "endTimeUnixNano": str(max(times)), "attributes": _kv(attrs)}
    if p["parent_span_id"] is not None:
        span["parentSpanId"] = p["parent_span_id"]
    if events:
        span["events"] = events
    parent = agent_span.get(p["delegation_parent_id"]) if kind == "delegate" else None
    if parent is not None:
        span["links"] = [{"traceId": parent[0], "spanId": parent[1],
                          "attributes": _kv({"delegation.link": "parent"})}]
    outcome = p["action_outcome"]
    span["status"] = {"code": ERROR if outcome == "failure" else OK} \
        if outcome in ("success", "failure") else {}
    return span


def _decision_logs(p: dict[str, Any], members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    decision = label(p.get("labels"), "decision")
    if p["event_kind"] != "proposal" or not decision:
        return []
    sev, text = SEVERITY.get(decision, (9, "INFO"))
    attrs = {"event.name": "containmentbench.policy.decision", "decision": decision,
             "gen_ai.tool.name": p["tool_operation"] or p["tool_name"]}
    for col in ("delegation_id", "call_id", "event_id"):
        if p.get(col) is not None:
            attrs[ATTRS[col]] = p[col]
    rule = label(p["labels"], "rule_id")
    if rule:
        attrs["rule_id"] = rule
    t = str(_nanos(p["time"]))
    return [{"timeUnixNano": t, "observedTimeUnixNano": t, "severityNumber": sev,
             "severityText": text, "body": {"stringValue": f"{decision} {attrs['gen_ai.tool.name']}"},
             "attributes": _kv(attrs), "traceId": p["trace_id"], "spanId": p["span_id"]}]


def _resource(agent: str, inst: str | None) -> dict[str, Any]:
    res = {"service.name": "containmentbench-agent-runtime", "gen_ai.agent.id": agent}
    if inst is not None:
        res["service.instance.id"] = inst
    return {"attributes": _kv(res)}


def _batches(groups: dict[tuple[str, str | None], list[dict[str, Any]]], top: str,
             scope_key: str, items_key: str, max_bytes: int) -> list[dict[str, Any]]:
    scope = {"name": "containmentbench.cim", "version": CIM_VERSION}
    docs: list[dict[str, Any]] = []
    cur: list[dict[str, Any]] = []
    size = 0
    for (agent, inst), items in groups.items():
        if not items:
            continue
        res = _resource(agent, inst)
        base = len(json.dumps(res, separators=(",", ":"))) + 128
        chunk: list[dict[str, Any]] = []
        for it in items:
            n = len(json.dumps(it, separators=(",", ":"))) + 1
            if (cur or chunk) and size + base + n > max_bytes:
                if chunk:
                    cur.append({"resource": res, scope_key: [{"scope": scope,
                                                              items_key: chunk}]})
                docs.append({top: cur})
                cur, chunk, size = [], [], 0
            chunk.append(it)
            size += n
        cur.append({"resource": res, scope_key: [{"scope": scope, items_key: chunk}]})
        size += base
    if cur:
        docs.append({top: cur})
    return docs


def _need(d: Any, key: str, where: str, kind: type = str) -> Any:
    if not isinstance(d, dict) or key not in d or not isinstance(d[key], kind):
        raise BenchError(f"{where}: missing or malformed '{key}'", field=key)
    return d[key]


def _hexid(v: str, n: int, where: str, key: str) -> str:
    if len(v) != n or any(c not in "0123456789abcdef" for c in v.lower()):
        raise BenchError(f"{where}: '{key}' must be {n} hex digits", field=key)
    return v


#: the type each attribute CIM reads must have (cim/otlp_shape.py checks them first)
SPAN_TYPES = {**{key: "strings" if col == "integrity" else "string"
                 for col, key in ATTRS.items()},
              "cim.trace.synthetic": "bool", "cim.time_unix_nano": "nanos",
              "gen_ai.operation.name": "string", "gen_ai.agent.name": "string",
              "gen_ai.provider.name": "string", "gen_ai.tool.name": "string"}
EVENT_TYPES = {**{key: "strings" if col == "integrity" else "string"
                  for col, key in ATTRS.items()},
               "cim.null": "columns", "cim.labels": "labels"}
NULLABLE = {f.name for f in CIM_EVENTS if f.nullable and f.name in ATTRS}


def from_otlp(docs: Iterable[dict[str, Any]], where: str = "<otlp>") -> pa.Table:
    """CIM rows back from trace export requests written by ``to_otlp`` (evaluation fields
    set to a covered gateway capture without ground truth). Every request's shapes and
    types are checked before any row is built (``cim/otlp_shape.py``)."""
    from containmentbench.cim.otlp_shape import check_request

    docs = list(docs)
    for doc in docs:
        check_request(doc, SPAN_TYPES, EVENT_TYPES, NULLABLE)
    cols: dict[str, list[Any]] = {f.name: [] for f in CIM_EVENTS}
    for di, doc in enumerate(docs):
        for ri, rs in enumerate(_need(doc, "resourceSpans", f"{where}[{di}]", list)):
            w = f"{where}[{di}].resourceSpans[{ri}]"
            for si, ss in enumerate(_need(rs, "scopeSpans", w, list)):
                for pi, sp in enumerate(_need(ss, "spans", f"{w}.scopeSpans[{si}]", list)):
                    for row in _span_rows(sp, f"{w}.scopeSpans[{si}].spans[{pi}]"):
                        for f in CIM_EVENTS:
                            cols[f.name].append(row.get(f.name))
    try:
        return conform(cols)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
        raise BenchError(f"the spans do not make CIM rows ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:160]})", field="resourceSpans") from None


def _span_rows(sp: dict[str, Any], w: str) -> list[dict[str, Any]]:
    from containmentbench.cim.otlp_shape import nanos

    trace = _hexid(_need(sp, "traceId", w), 32, w, "traceId")
    span = _hexid(_need(sp, "spanId", w), 16, w, "spanId")
    start = nanos(sp["startTimeUnixNano"], f"{w}.startTimeUnixNano")
    attrs = {a["key"]: _unvalue(a.get("value"), f"{w}.{a.get('key')}")
             for a in _need(sp, "attributes", w, list)}
    for key in REQUIRED_ATTRS:
        if key not in attrs:
            raise BenchError(f"{w}: attribute '{key}' missing", field=key)
    synthetic = attrs.get("cim.trace.synthetic", False)
    base: dict[str, Any] = {col: attrs.get(key) for key, col in _BY_KEY.items()}
    labels = [(k[len("cim.labels."):], v) for k, v in attrs.items()
              if k.startswith("cim.labels.")]
    base.update(labels=labels or None, trace_id=None if synthetic else trace,
                span_id=None if synthetic else span,
                parent_span_id=sp.get("parentSpanId"),
                time=int(attrs.get("cim.time_unix_nano", start)) // 1000,
                capture="gateway", covered=True, gt_delegation_id=None)
    out = [base]
    for ei, ev in enumerate(sp.get("events", [])):
        if ev.get("name") != "cim.row":
            continue
        we = f"{w}.events[{ei}]"
        ea = {a["key"]: _unvalue(a.get("value"), f"{we}.{a.get('key')}")
              for a in _need(ev, "attributes", we, list)}
        row = dict(base)
        row["time"] = nanos(ev["timeUnixNano"], f"{we}.timeUnixNano") // 1000
        for key, v in ea.items():
            if key in _BY_KEY:
                row[_BY_KEY[key]] = v
        for col in ea.get("cim.null", []):
            row[col] = None
        if "cim.labels" in ea:
            row["labels"] = [tuple(x) for x in json.loads(ea["cim.labels"])] or None
        out.append(row)
    return out


# ------------------------------------------------------------------ protobuf (extra `otel`)

def _b64(doc: Any) -> Any:
    """OTLP/JSON (hex ids) -> proto3 JSON mapping (base64 bytes) for json_format."""
    if isinstance(doc, dict):
        return {k: (base64.b64encode(bytes.fromhex(v)).decode()
                    if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else _b64(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_b64(x) for x in doc]
    return doc


def to_protobuf(doc: dict[str, Any], signal: str = "traces") -> bytes:
    """One export request as OTLP protobuf bytes; strict: an unknown field is an error."""
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise BenchError("OTLP protobuf needs the 'otel' extra (opentelemetry-proto)",
                         field="format") from None
    msg = ExportTraceServiceRequest() if signal == "traces" else ExportLogsServiceRequest()
    try:
        json_format.ParseDict(_b64(copy.deepcopy(doc)), msg)
    except json_format.ParseError as exc:
        raise BenchError(f"not a valid OTLP {signal} request: {exc}", field=signal) from None
    return msg.SerializeToString()


def write_otlp(table: pa.Table, folder: Any, *, max_bytes: int = MAX_BYTES,
               proto: bool = False) -> dict[str, int]:
    """``traces-NNNNN.json`` / ``logs-NNNNN.json`` (and ``.binpb`` with ``proto``) into a
    folder of the store under construction (seal.py); returns bytes and counts."""
    from containmentbench.integrity import writer

    traces, logs = to_otlp(table, max_bytes)
    out = {"json_bytes": 0, "proto_bytes": 0, "n_trace_files": len(traces),
           "n_log_files": len(logs),
           "n_spans": sum(len(ss["spans"]) for d in traces for rs in d["resourceSpans"]
                          for ss in rs["scopeSpans"])}
    for signal, docs in (("traces", traces), ("logs", logs)):
        for i, doc in enumerate(docs):
            text = json.dumps(doc, separators=(",", ":"))
            writer.build_text(folder / f"{signal}-{i:05d}.json", text)
            out["json_bytes"] += len(text)
            if proto:
                data = to_protobuf(doc, signal)
                writer.build_bytes(folder / f"{signal}-{i:05d}.binpb", data)
                out["proto_bytes"] += len(data)
    return out


def read_otlp(folder: Any) -> pa.Table:
    """Every ``traces-*.json`` of an OTLP folder back to CIM rows (BenchError names the file
    and the field of anything malformed)."""
    from pathlib import Path

    from containmentbench.integrity import safeopen

    files = sorted(Path(folder).glob("traces-*.json"))
    if not files:
        raise BenchError("no traces-*.json files (an OTLP folder from `cim export`)",
                         file=str(folder))
    docs = []
    for f in files:
        # the one safe open: a FIFO, a device, a socket or a file over the cap is refused
        text = safeopen.read_text(f, limit=MAX_IMPORT_BYTES, what="OTLP file")
        try:
            docs.append((f, json.loads(text)))
        except json.JSONDecodeError as exc:
            raise BenchError(f"not OTLP/JSON ({exc.msg})", file=str(f), line=exc.lineno) \
                from None
        except RecursionError:
            raise BenchError("not OTLP/JSON (nested too deeply)", file=str(f)) from None
    tables = []
    for f, doc in docs:
        try:
            tables.append(from_otlp([doc], f.name))
        except BenchError as exc:
            raise BenchError(exc.detail, file=str(f), field=exc.field) from None
    return pa.concat_tables(tables)
