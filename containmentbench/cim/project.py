"""Rollout trace events -> CIM rows (paper 002 Appendix B.1, Table 8), post hoc or live.

``Projector`` turns the gateway-emitted events of a rollout, fed one at a time in emission
order, into CIM rows. The same object serves the post-hoc export (``project_rows``, fed a
finished trace) and the live emitter of the gateway (gateway/emitter.py, fed at capture time
with a wall clock), so the two agree on every field but ``time`` by construction; the test
suite checks it on real rollouts (the cross-check of issue 25).

Which events: the gateway kinds (``proposal`` for every call that reached the gateway,
``commit``, ``delegate`` for each minting, ``spawn``, ``message``), plus approved
confirmations as ``approval`` rows (an authority-expansion event, §5.4, fields copied from
the proposal with the same call id). The projection is lossless for the gateway-bound fields:
``unproject`` recovers every column in ``PROJECTED`` (tested).

Trace context, as an OpenTelemetry-instrumented agent framework would emit it (§4.2
"workflow correlation identifiers"; the GenAI conventions' ``invoke_agent`` and
``execute_tool`` spans):

* one trace per root task: ``trace_id`` = sha256(rollout_id, session)[:32]; a session's
  entry agent and every sub-agent it delegates or hands off to share it, so a trace holds
  several delegations (I2) and trace-only reconstruction (B0) faces real ambiguity;
* one span per agent run (``delegate``, ``spawn`` and the agent's own ``message`` rows) and
  one per tool call (``proposal``, ``commit``, ``approval`` and the caller's ``message``
  rows share it, keyed by call id);
* a tool-call span's parent is its agent's span; a sub-agent's span's parent is the
  ``delegate``/``handoff`` tool call that created it; a session's entry agent is the root.

Other derived fields: ``time`` = 2026-01-01T00:00:00Z + tick x ``tick_us`` post hoc (the
logical clock; all rollouts of an export share the epoch, so they are concurrent
delegations), wall-clock microseconds live; ``tool_name`` is the tool family
(``TOOL_FAMILY``), ``tool_operation`` the sandbox tool, ``gateway`` for rows the gateway
emits itself; ``agent_instance_id`` = rollout id + ``/`` + instance (instance names are only
unique within a rollout); ``workflow_id`` = rollout id; ``session_id`` = rollout id +
``/s`` + session; ``resource_uri`` = ``cb://<tool family>/<resource class>/<id>`` (a
canonical locator built from gateway metadata, never from payloads); ``labels`` keep the
trace's ``target``, the policy ``decision`` and ``rule_id`` of a proposal (its decision event
follows it, so a proposal row is released with its decision) and the model provider;
``gt_delegation_id`` is the delegation the gateway minted for the acting instance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.cim.schema import CIM_EVENTS, conform

GATEWAY_KINDS = ("proposal", "commit", "delegate", "spawn", "message")
EPOCH_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
TICK_US = 1_000_000
AGENT_TOOLS = ("delegate", "handoff")

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
# GenAI ``gen_ai.provider.name`` per backend (the conventions' well-known values where any)
PROVIDER = {"sim": "containmentbench.sim", "scripted": "containmentbench.scripted",
            "hf": "huggingface", "vllm": "vllm", "openai": "openai"}

# Trace columns the projection must preserve for gateway kinds.
PROJECTED = ("rollout_id", "seq", "event_id", "kind", "session", "tick", "agent_id",
             "agent_instance", "delegation_id", "delegation_parent_id", "principal_id",
             "binding", "call_id", "tool", "action_semantic", "direction", "resource_class",
             "resource_id", "sensitivity_label", "principal_scope", "target_principal",
             "target", "outcome", "agent_hints", "integrity")


def _hex(*parts: Any, n: int) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:n]


def trace_id_of(rollout_id: str, session: int) -> str:
    """One trace per root task (a session's request and every agent it reaches)."""
    return _hex(rollout_id, "task", int(session), n=32)


def agent_span_of(rollout_id: str, instance: str) -> str:
    return _hex(rollout_id, "agent", instance, n=16)


def call_span_of(rollout_id: str, call_id: str) -> str:
    return _hex(rollout_id, "call", call_id, n=16)


def resource_uri(tool_name: str, resource_class: str | None, resource_id: str | None
                 ) -> str | None:
    if resource_id is None:
        return None
    return f"cb://{tool_name}/{resource_class or '-'}/{quote(str(resource_id), safe='@.-_')}"


Clock = Callable[[dict[str, Any]], int]


def tick_clock(tick_us: int = TICK_US) -> Clock:
    return lambda ev: EPOCH_US + int(ev["tick"]) * tick_us


class Projector:
    """Incremental trace-event -> CIM-row projection for any number of rollouts.

    ``feed`` one event at a time in emission order (per rollout, by ``seq``); it returns
    the rows that are complete. ``close`` releases rows still waiting for a decision."""

    def __init__(self, clock: Clock | None = None, provider: dict[str, str] | None = None
                 ) -> None:
        self.clock = clock or tick_clock()
        self.provider = provider or {}
        self.minted: dict[tuple[str, str], str] = {}          # (rollout, instance) -> dlg
        self.call_owner: dict[tuple[str, str], str] = {}      # (rollout, call) -> instance
        self.agent_parent: dict[tuple[str, str], str | None] = {}
        self.last_send: dict[str, str] = {}                   # rollout -> delegating call
        self.proposals: dict[tuple[str, str], dict[str, Any]] = {}
        self.pending: dict[tuple[str, str], dict[str, Any]] = {}

    def _span(self, r: dict[str, Any], kind: str) -> tuple[str, str | None]:
        rid, inst, call = r["rollout_id"], r["agent_instance"], r.get("call_id")
        if kind in ("proposal", "commit", "approval") or (
                kind == "message" and call is not None
                and self.call_owner.get((rid, call)) == inst):
            owner = self.call_owner.get((rid, call), inst)
            return call_span_of(rid, call), agent_span_of(rid, owner)
        return agent_span_of(rid, inst), self.agent_parent.get((rid, inst))

    def _row(self, r: dict[str, Any], kind: str, t_us: int) -> dict[str, Any]:
        rid, inst = r["rollout_id"], r["agent_instance"]
        tool = r["tool"]
        family = TOOL_FAMILY.get(tool, tool) if tool else KIND_TOOL[kind]
        span, parent = self._span(r, kind)
        labels = []
        if r.get("target") is not None:
            labels.append(("target", r["target"]))
        if rid in self.provider:
            labels.append(("provider", self.provider[rid]))
        return {
            "time": t_us, "event_id": r["event_id"], "delegation_id": r["delegation_id"],
            "delegation_parent_id": r["delegation_parent_id"],
            "principal_user_id": r["principal_id"], "agent_id": r["agent_id"],
            "agent_instance_id": f"{rid}/{inst}" if inst is not None else None,
            "tool_name": family, "tool_operation": tool,
            "action_semantic": r["action_semantic"], "action_outcome": r["outcome"],
            "direction": r["direction"], "principal_scope": r["principal_scope"],
            "resource_class": r["resource_class"], "resource_id": r["resource_id"],
            "resource_uri": resource_uri(family, r["resource_class"], r["resource_id"]),
            "sensitivity_label": r["sensitivity_label"],
            "target_principal_id": r["target_principal"],
            "trace_id": trace_id_of(rid, r["session"]), "span_id": span,
            "parent_span_id": parent, "workflow_id": rid, "labels": labels or None,
            "event_kind": kind, "delegation_binding": r["binding"] or "unbound",
            "call_id": r.get("call_id"), "session_id": f"{rid}/s{int(r['session'])}",
            "agent_hints": r["agent_hints"], "integrity": r["integrity"],
            "capture": "gateway", "covered": True,
            "gt_delegation_id": self.minted.get((rid, inst), r["delegation_id"]),
        }

    def feed(self, ev: dict[str, Any]) -> list[dict[str, Any]]:
        rid, kind = ev["rollout_id"], ev["kind"]
        call = ev.get("call_id")
        if kind == "decision" and (rid, call) in self.pending:
            row = self.pending.pop((rid, call))
            labels = [*(row["labels"] or []), ("decision", ev["decision"])]
            if ev.get("rule_id"):
                labels.append(("rule_id", ev["rule_id"]))
            row["labels"] = labels
            return [row]
        if kind == "confirmation" and ev.get("decision") == "approved":
            p = self.proposals.get((rid, call))
            if p is None:
                return []
            a = {k: p[k] for k in ("agent_id", "agent_instance", "delegation_id",
                                   "delegation_parent_id", "principal_id", "binding")}
            a.update(rollout_id=rid, seq=ev["seq"], event_id=ev["event_id"], kind="approval",
                     session=ev["session"], tick=ev["tick"], call_id=call, tool=None,
                     action_semantic="delegate", direction=None, resource_class="delegation",
                     resource_id=p["delegation_id"], sensitivity_label=None,
                     principal_scope=None, target_principal=None, target=None,
                     outcome="success", agent_hints=None, integrity=None)
            return [self._row(a, "approval", self.clock(ev))]
        if kind not in GATEWAY_KINDS:
            return []
        inst = ev["agent_instance"]
        if kind == "delegate":
            self.minted[(rid, inst)] = ev["resource_id"]
            parent_call = self.last_send.get(rid) if ev["delegation_parent_id"] else None
            self.agent_parent[(rid, inst)] = call_span_of(rid, parent_call) \
                if parent_call is not None else None
        elif kind == "proposal":
            self.call_owner[(rid, call)] = inst
            self.proposals[(rid, call)] = ev
        elif kind == "message" and ev.get("tool") in AGENT_TOOLS \
                and self.call_owner.get((rid, call)) == inst:
            self.last_send[rid] = call
        row = self._row(ev, kind, self.clock(ev))
        if kind == "proposal":
            self.pending[(rid, call)] = row
            return []
        return [row]

    def close(self) -> list[dict[str, Any]]:
        out = list(self.pending.values())
        self.pending.clear()
        return out


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    cols: dict[str, list[Any]] = {f.name: [r[f.name] for r in rows] for f in CIM_EVENTS}
    return conform(cols)


def project_rows(rows: Iterable[dict[str, Any]], topology: dict[str, str] | None = None,
                 tick_us: int = TICK_US, provider: dict[str, str] | None = None
                 ) -> tuple[pa.Table, list[str]]:
    """CIM rows (emission order: rollout, seq) and each row's workflow (topology)."""
    events = sorted(rows, key=lambda r: (r["rollout_id"], r["seq"]))
    p = Projector(tick_clock(tick_us), provider)
    out: list[dict[str, Any]] = []
    for ev in events:
        out.extend(p.feed(ev))
    out.extend(p.close())
    seq = {e["event_id"]: (e["rollout_id"], e["seq"]) for e in events}
    out.sort(key=lambda r: seq[r["event_id"]])
    workflows = [(topology or {}).get(r["workflow_id"], "rollout") for r in out]
    return rows_to_table(out), workflows


def project_events(events: pa.Table, rollouts: pa.Table | None = None,
                   tick_us: int = TICK_US) -> tuple[pa.Table, list[str]]:
    """Project a trace ``events`` table (and ``rollouts`` for topology and provider)."""
    topo = prov = None
    if rollouts is not None:
        ids = rollouts.column("rollout_id").to_pylist()
        topo = dict(zip(ids, rollouts.column("topology").to_pylist()))
        prov = {r: PROVIDER.get(b, b) for r, b in
                zip(ids, rollouts.column("backend").to_pylist())}
    keep = ("decision", "confirmation", *GATEWAY_KINDS)
    mask = pc.is_in(events.column("kind"), pa.array(keep))
    return project_rows(events.filter(mask).to_pylist(), topo, tick_us, prov)


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
        "target": [label(t, "target") for t in target],
        "outcome": df["action_outcome"], "agent_hints": df["agent_hints"],
        "integrity": df["integrity"],
    })


def label(labels: Any, key: str) -> str | None:
    """One key of a CIM ``labels`` map as Arrow, polars or a list of pairs gives it."""
    if not labels:
        return None
    if isinstance(labels, dict) and "key" not in labels:  # polars may map Arrow maps to dicts
        return labels.get(key)
    for item in labels:
        k, v = (item["key"], item["value"]) if isinstance(item, dict) else item
        if k == key:
            return v
    return None
