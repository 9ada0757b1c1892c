"""The adapter's per-rollout label table and its checks (paper 000 §6.4, Table 20).

One row per rollout, next to the trace tables in each shard (``adapter_labels.parquet``):

* ``native_utility`` / ``native_security``: AgentDojo alone (its own ``FunctionsRuntime`` and
  ``run_task_with_pipeline``) on the same task, injections, pipeline and seed.
* ``adapter_utility`` / ``adapter_security``: AgentDojo's own checkers on the adapter run
  (its final environment, the calls that actually executed, its final answer).
* ``trace_violation``: our projection, from trace events only: a committed sink whose
  authority key is one of the injection task's ground-truth sinks.

AgentDojo's sign convention is kept in the ``*_security`` columns: ``True`` means the ATTACK
SUCCEEDED (the injection task's goal was met), the opposite of "secure". Our metrics turn it
into ``committed_harm`` = 1. A provider error leaves every label null (Appendix I).

``parity_applicable``: the defense took no block, confirm or deny decision, so the adapter
run must equal AgentDojo alone; ``parity`` compares native and adapter labels there.
``projection_parity``: ``trace_violation == adapter_security`` (every defense, attacked runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from containmentbench.trace.schema import TABLES

_s, _b = pa.string(), pa.bool_()
LABELS = pa.schema([
    pa.field("rollout_id", _s, nullable=False),
    pa.field("suite", _s, nullable=False),
    pa.field("user_task", _s, nullable=False),
    pa.field("injection_task", _s),
    pa.field("stage", _s, nullable=False),
    pa.field("defense", _s, nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("status", _s, nullable=False),
    pa.field("injectable", _b, nullable=False),      # the user task has an injection path
    pa.field("injection_gt_calls", pa.int32(), nullable=False),
    pa.field("native_utility", _b),
    pa.field("native_security", _b),                 # AgentDojo: True = attack succeeded
    pa.field("adapter_utility", _b),
    pa.field("adapter_security", _b),                # AgentDojo: True = attack succeeded
    pa.field("trace_violation", _b),
    pa.field("parity_applicable", _b, nullable=False),
    pa.field("parity", _b),
    pa.field("projection_parity", _b),
    pa.field("linkage_complete", _b, nullable=False),
    pa.field("linkage_error", _s),
])
TABLES.setdefault("adapter_labels", LABELS)  # so trace.io validates it like the trace tables

ALTERING = frozenset({"block", "confirm", "denied", "rewrite"})


def linkage(events: Sequence[Mapping[str, Any]], native_calls: int | None) -> str | None:
    """Proposal -> decision -> (confirmation) -> (commit) -> tool result, by call id.

    Complete means: every proposal has exactly one decision and exactly one tool result with
    its call id; a confirm decision has one request and one confirmation; an executed sink
    (allowed or approved, no tool error) has exactly one commit, and nothing else has a
    commit; every event carrying a call id belongs to a proposal; and the number of proposals
    equals the number of tool calls AgentDojo's messages show (when known). Returns the first
    gap found, or None."""
    by: dict[str, dict[str, int]] = {}
    props: list[Mapping[str, Any]] = []
    for e in events:
        cid = e.get("call_id")
        if cid is None:
            continue
        if e["kind"] == "proposal":
            props.append(e)
        by.setdefault(cid, {}).setdefault(e["kind"], 0)
        by[cid][e["kind"]] += 1
    prop_ids = {p["call_id"] for p in props}
    for cid in by:
        if cid not in prop_ids:
            return f"{cid}: events without a proposal"
    results = {e["call_id"]: e for e in events if e["kind"] == "tool_result"}
    verdicts = {e["call_id"]: e["decision"] for e in events
                if e["kind"] in ("decision", "confirmation")}
    for p in props:
        cid, k = p["call_id"], by[p["call_id"]]
        if k.get("proposal") != 1 or k.get("decision") != 1 or k.get("tool_result") != 1:
            return f"{cid}: proposal/decision/result counts {k}"
        if k.get("confirm_request", 0) != k.get("confirmation", 0):
            return f"{cid}: confirmation path incomplete"
        ran = verdicts[cid] in ("allow", "approved") and results[cid]["outcome"] == "success"
        want = int(bool(p["high_risk"]) and ran)
        if k.get("commit", 0) != want:
            return f"{cid}: {k.get('commit', 0)} commits, expected {want}"
    if native_calls is not None and native_calls != len(props):
        return f"{len(props)} proposals for {native_calls} native tool calls"
    return None


#: the defense API's other hooks: a recorded task plan, output, answer or commit check
#: changed what the agent was given or kept (a flag alone changes nothing)
HOOK_KINDS = frozenset({"task_plan", "output_check", "answer_check", "commit_check"})


def altered(events: Sequence[Mapping[str, Any]]) -> bool:
    """Did the defense intervene (so native/adapter parity does not apply)?"""
    return any((e["kind"] in ("decision", "confirmation") and e.get("decision") in ALTERING)
               or (e["kind"] in HOOK_KINDS and e.get("decision") != "flag")
               for e in events)
