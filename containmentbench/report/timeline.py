"""One rollout as a readable timeline (``containmentbench show``).

The order is the trace's own logical order (``seq``): prompt -> completion (raw text, parse
status and repairs) -> proposal -> decision (rule id, evidence) -> confirmation ->
commit / rollback -> observation. Each line marks the node's taint labels, whether it lies in
the taint closure T_tau (paper 000 eq. 2) and its delegation id, so a reader sees where the
untrusted content went and which rule stopped it.

Trace text is model- and attacker-written: every field is shown through
``containmentbench.escape.visible`` (ESC, C1, bidi, zero-width and NUL as escapes such as
``\\x1b``), so printing a trace never writes the clipboard (OSC 52), moves the cursor (CSI)
or disguises a link (OSC 8). ``raw=True`` (``show --raw``) keeps the stored characters.
"""

from __future__ import annotations

import json
from typing import Any

from containmentbench.escape import visible
from containmentbench.report.rundir import Rollout
from containmentbench.trace.graph import TraceGraph
from containmentbench.trace.recorder import is_tainted

SIM_NOTE = "simulated agent (sim backend): harness-validation trace, not a model result"
_HEADER_FIELDS = ("rollout_id", "study", "scenario_id", "stage", "domain", "topology",
                  "memory_mode", "carrier", "attack_goal", "model", "backend", "agent_profile",
                  "defense", "method_version", "policy_hash", "parser_version", "seed", "status",
                  "error", "final_answer")


def _short(text: Any, width: int, raw: bool = False) -> str:
    # escaped before whitespace is collapsed, so NEL, VT and FF show as escapes too
    s = " ".join((str(text) if raw else visible(str(text))).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _line(text: str, raw: bool = False) -> str:
    """One output line: every control spelled out, newline and tab too (a line's own fields
    never hold them, so one there came from the trace), unless ``raw``. ``visible`` is
    idempotent, so fields already escaped by ``_short`` are unchanged."""
    if raw:
        return text
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


def closure_sets(r: Rollout) -> tuple[set[int], set[int]]:
    """(taint closure T_tau, structural reach R_tau) of the rollout (eq. 2 and 4)."""
    g = TraceGraph(r.events, r.edges)
    return g.taint_closure(), g.structural_reach()


def event_detail(ev: dict[str, Any], width: int = 100, raw: bool = False) -> str:
    """The one-line gist of an event, by kind (controls spelled out unless ``raw``)."""
    k = ev["kind"]

    def short(text: Any, w: int = width) -> str:
        return _short(text, w, raw)

    parts: list[str] = []
    if k == "model_call":
        parts.append(f"completion: {short(ev.get('text') or '')}")
        if ev.get("parse_status"):
            parts.append(f"parse={ev['parse_status']}")
        if ev.get("repaired"):
            parts.append(f"repairs={','.join(ev.get('repairs') or []) or 'yes'}")
    elif k in ("proposal", "invalid_tool", "dropped_call"):
        parts.append(f"{ev.get('tool')}({short(ev.get('args') or '', width // 2)})")
        if ev.get("action_semantic"):
            parts.append(f"action={ev['action_semantic']}")
        if ev.get("target"):
            parts.append(f"target={ev['target']}")
        if ev.get("high_risk"):
            parts.append("HIGH-RISK")
        if ev.get("ledger_match") is not None:
            parts.append(f"ledger_match={ev['ledger_match']}")
        if ev.get("tainted_fields"):
            parts.append(f"tainted_fields={','.join(ev['tainted_fields'])}")
    elif k in ("decision", "confirm_request", "confirmation"):
        parts.append(f"{ev.get('decision')}")
        if ev.get("rule_id"):
            parts.append(f"rule={ev['rule_id']}")
        if ev.get("evidence"):
            parts.append(f"evidence={short(ev['evidence'], width // 2)}")
    elif k in ("commit", "rollback"):
        parts.append(str(ev.get("tool")) + (f" -> {ev['target']}" if ev.get("target") else ""))
        if ev.get("commit_id"):
            parts.append(f"commit_id={ev['commit_id']}")
        if ev.get("outcome"):
            parts.append(f"outcome={ev['outcome']}")
    elif k == "parse_error":
        parts.append(f"parse={ev.get('parse_status')}: {short(ev.get('text') or '')}")
    else:
        if ev.get("tool"):
            parts.append(str(ev["tool"]))
        if ev.get("target"):
            parts.append(f"target={ev['target']}")
        if ev.get("text"):
            parts.append(short(ev["text"]))
    return _line("  ".join(parts), raw)  # tool names, targets, ids: model-written too


def to_json(r: Rollout) -> dict[str, Any]:
    closure, reach = closure_sets(r)
    events = []
    for ev in r.events:
        e = dict(ev)
        e["in_taint_closure"] = int(ev["seq"]) in closure
        e["in_structural_reach"] = int(ev["seq"]) in reach
        events.append(e)
    return {"rollout": r.row, "simulated_agent": r.row["backend"] == "sim",
            "taint_closure": sorted(closure), "structural_reach": sorted(reach),
            "events": events, "edges": r.edges}


def render_text(r: Rollout, width: int = 100, raw: bool = False) -> str:
    """The timeline for a terminal; every line through ``_line`` (controls spelled out)
    unless ``raw``."""
    closure, reach = closure_sets(r)
    row = r.row
    out = [f"rollout {row['rollout_id']}"]
    if row["backend"] == "sim":
        out.append(f"  [{SIM_NOTE}]")
    for f in _HEADER_FIELDS[1:]:
        if row.get(f) not in (None, ""):
            out.append(f"  {f:<15} {_short(row[f], width, raw)}")
    out.append(f"  {'counts':<15} events={row['n_events']} model_calls={row['n_model_calls']} "
               f"proposals={row['n_proposals']} commits={row['n_commits']} "
               f"blocked={row['n_blocked']} confirm={row['n_confirm']} "
               f"invalid_tool={row['n_invalid_tool']} parse_error={row['n_parse_error']}")
    out.append(f"  {'taint':<15} closure |T|={len(closure)}  structural reach |R|={len(reach)}"
               "  (paper 000 eq. 2, 4)")
    out.append("")
    out.append("  seq  tick  T  agent / delegation          kind             detail")
    for ev in r.events:
        seq = int(ev["seq"])
        mark = "T" if seq in closure else ("t" if is_tainted(ev.get("labels") or []) else " ")
        who = ev.get("agent_id") or "-"
        if ev.get("delegation_id"):
            who += f" d={ev['delegation_id']}"
        line = (f"  {seq:>3}  {ev['tick']:>4}  {mark}  {_short(who, 26, raw):<26}  "
                f"{ev['kind']:<15}  {event_detail(ev, width, raw)}")
        labels = [lab for lab in (ev.get("labels") or []) if lab]
        if labels:
            line += f"  labels={','.join(labels)}"
        out.append(line)
    out.append("")
    out.append("  T: node in the taint closure; t: labelled tainted but outside the closure")
    return "\n".join(_line(x, raw) for x in out)


def dumps(r: Rollout) -> str:
    return json.dumps(to_json(r), indent=2, sort_keys=True, default=str)
