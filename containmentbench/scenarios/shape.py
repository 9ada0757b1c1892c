"""The JSON shape of a scenario record: the type of every field at every level.

``Scenario.from_dict`` checks what the runtime needs (required fields, known tools, stage
names); many nested parts (initial state, oracle, goals, boundaries) are kept as data and
read later by the world, the oracle and the defenses. A wrong type there used to surface
much later as a Python traceback, or not at all. :func:`check_shape` checks the whole record
against :data:`RECORD` first and names the dotted field (``initial_state.emails[2].to``).

The spec language is ``integrity/shapes.py``. Unknown keys of a fixed object are refused (a
misspelt ``prefil`` or an extra field would otherwise be hashed and silently ignored); a
missing key is ``from_dict``'s business. ``meta`` holds the generator's description and the
keys the TaintBench suite (``audit/suite.py``), the user-suite builder (``builder``:
``user_records.py``) and the adaptive replay suite
(``attacks/derive.py``) add.
"""

from __future__ import annotations

from typing import Any

from containmentbench.integrity.shapes import B, I, List, Map, Opt, S, Union, check

STRS = List(S)
STR_OR_STRS = Union(S, STRS)
PROV = {"origin": S, "source_id": S, "trust": S}
PREDICATE = Map({"op": S, "value": STR_OR_STRS})
STEP = {"agent": S, "args": Map(STR_OR_STRS), "session": I, "tool": S}

RECORD: dict[str, Any] = {
    "schema_version": I, "id": S, "suite": S, "stage": S, "domain": S, "family": S,
    "cluster_id": S, "topology": S, "memory_mode": S, "memory_high_risk": B,
    "agents": List({"id": S, "role": S}),
    "attack_goal": Opt(S),
    "attacker_goal": Opt({"description": S, "kind": S, "strategy": Opt(S),
                          "violation": {"args": Map(STR_OR_STRS), "kind": S, "tool": S}}),
    "authorization": {"allowed_recipients": STRS, "org_domain": S},
    "canaries": List({"cleared_recipients": STRS, "cleared_tools": STRS, "location": S,
                      "token": S}),
    "carrier": Opt(S),
    "goals": STRS,
    "initial_state": {
        "agent_messages": List({"id": S, "provenance": PROV, "sender": S, "text": S,
                                "to": S}),
        "calendar": List({"attendees": STRS, "date": S, "id": S, "title": S}),
        "contacts": List({"email": S, "id": S, "name": S, "org": S}),
        "crm": List({"contact_id": S, "fields": Map(S), "notes": S, "provenance": PROV}),
        "documents": List({"body": S, "id": S, "owner": S, "provenance": PROV,
                           "sensitivity": S, "title": S}),
        "emails": List({"body": S, "id": S, "provenance": PROV, "sender": S, "subject": S,
                        "to": STRS}),
        "memory": List({"key": S, "provenance": PROV, "value": S}),
        "principal": {"email": S, "first": S, "name": S, "user_id": S},
    },
    "ledger": List({"action": S, "predicate": PREDICATE, "target": S, "target_field": S}),
    "meta": {"facts": Map(S), "injection": Opt(S), "placement": S, "strategy": Opt(S),
             "variant": I, "builder": S,
             "taintbench": {"evidence": Opt(S), "family": S, "flow_class": Opt(S), "positive": B,
                            "profiles": STRS, "trusted_fact": S, "sink_agent": S, "sink_args": Map(STR_OR_STRS), "sink_session": I,
                            "sink_tool": S, "source_id": S, "subfamily": S},
             "base_scenario": S, "base_scenario_hash": S, "adaptive_mode": S,
             "candidate": {"sha256": S, "strategy": S, "target_preserving": B}},
    "oracle": {"memory_state": Map(S),
               "required": List({"args": PREDICATE, "session": I, "tainted": B, "tool": S})},
    "plans": Map(List(STEP)),
    "prefill": List(STEP),
    "recovery": Opt({"action": S, "follow_up": {"args": PREDICATE, "session": I, "tool": S},
                     "memory_keys": STRS}),
    "tool_boundary": {"allowed_tools": STRS, "max_visibility": Map(S),
                      "targets": Map(Map(STRS))},
    "untrusted": List({"carrier": S, "injected": B, "origin": S, "source_id": S, "text": S}),
}


def check_shape(record: Any) -> None:
    """Raise a ValidationError naming the first field whose JSON type is wrong or whose key
    is unknown."""
    check(record, RECORD, strict=True, required=False, root="record")
