"""The JSON shape of a scenario record: the type of every field at every level.

``Scenario.from_dict`` checks what the runtime needs (required fields, known tools, stage
names); many nested parts (initial state, oracle, goals, boundaries) are kept as data and
read later by the world, the oracle and the defenses. A wrong type there used to surface
much later as a Python traceback, or not at all. :func:`check_shape` checks the whole record
against :data:`RECORD` first and names the dotted field (``initial_state.emails[2].to``).

Spec language: ``S``/``I``/``B`` (str, int, bool: a bool is not an int here), ``Opt(T)``
(T or null), ``List(T)``, ``Map(T)`` (an object with free keys, values T), ``Union(A, B)``,
and a dict (an object with these known keys; a missing key is ``from_dict``'s business,
unknown keys are left to it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from containmentbench.errors import ValidationError

S, I, B = "string", "integer", "boolean"


@dataclass(frozen=True)
class Opt:
    of: Any


@dataclass(frozen=True)
class List:
    of: Any


@dataclass(frozen=True)
class Map:
    of: Any


@dataclass(frozen=True)
class Union:
    a: Any
    b: Any


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
             "variant": I},
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

_JSON = {dict: "object", list: "array", str: S, int: I, float: "number", bool: B,
         type(None): "null"}


def _name(spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Opt):
        return f"{_name(spec.of)} or null"
    if isinstance(spec, List):
        return f"array of {_name(spec.of)}"
    if isinstance(spec, Union):
        return f"{_name(spec.a)} or {_name(spec.b)}"
    return "object"


def _ok(value: Any, spec: Any) -> bool:
    """Shallow type test (children are checked by the walk)."""
    if isinstance(spec, str):
        return _JSON.get(type(value)) == spec
    if isinstance(spec, Opt):
        return value is None or _ok(value, spec.of)
    if isinstance(spec, Union):
        return _ok(value, spec.a) or _ok(value, spec.b)
    if isinstance(spec, List):
        return isinstance(value, list)
    return isinstance(value, dict)  # Map or fixed object


def _walk(value: Any, spec: Any, where: str) -> None:
    if not _ok(value, spec):
        raise ValidationError(f"expected {_name(spec)}, got {_JSON.get(type(value), 'value')}",
                              field=where or "record")
    if isinstance(spec, Opt):
        if value is not None:
            _walk(value, spec.of, where)
    elif isinstance(spec, Union):
        _walk(value, spec.a if _ok(value, spec.a) else spec.b, where)
    elif isinstance(spec, List):
        for i, v in enumerate(value):
            _walk(v, spec.of, f"{where}[{i}]")
    elif isinstance(spec, Map):
        for k, v in value.items():
            _walk(v, spec.of, f"{where}.{k}" if where else k)
    elif isinstance(spec, dict):
        for k, sub in spec.items():
            if k in value:
                _walk(value[k], sub, f"{where}.{k}" if where else k)


def check_shape(record: Any) -> None:
    """Raise a ValidationError naming the first field whose JSON type is wrong."""
    _walk(record, RECORD, "")
