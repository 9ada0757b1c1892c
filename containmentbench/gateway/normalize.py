"""Deterministic normalization of tool operations to CIM semantics (paper 002 §4.2, App. B.2).

Tier-1 verbs come from each tool's declared verb (read, search, write, share, invite, delete,
move, delegate, ...); Tier-2 qualifiers are derived from tool-native metadata only (the
operation, the target ids, recipient addresses and declared visibility, and the resource's
declared sensitivity), never from payload content (App. B.2 "Mapping guidance").
"""

from __future__ import annotations

from typing import Any

from containmentbench.sandbox.tools import TOOLS, recipients_of
from containmentbench.sandbox.world import World

_SENSITIVITY = {"message": "internal", "memory": "internal", "crm_record": "confidential",
                "calendar_event": "internal", "channel": "internal", "task_record": "internal",
                "draft": "internal", "contact": "internal", "agent": "internal",
                "commit": "internal"}


def _resource_id(tool: str, args: dict[str, Any]) -> str | None:
    spec = TOOLS[tool]
    for p in spec.params:
        if p.role == "target":
            v = args.get(p.name)
            if isinstance(v, str) and v:
                return v
    return None


def _scope(recips: list[str], principal_email: str, org_domain: str) -> str:
    if not recips:
        return "self"
    if all(r == principal_email.lower() for r in recips):
        return "self"
    if all(r.endswith("@" + org_domain) for r in recips):
        return "org"
    return "external"


def normalize(tool: str, args: dict[str, Any], world: World, org_domain: str) -> dict[str, Any]:
    """CIM fields for one tool call: Tier-1 ``action_semantic`` and Tier-2 qualifiers."""
    spec = TOOLS[tool]
    verb = spec.verb
    vis = args.get("visibility")
    if tool == "post_status_note" and vis == "public":
        verb = "share"  # publishing a note distributes it (App. B.2: share)
    recips = recipients_of(tool, args) if spec.params else []
    scope = _scope(recips, world.principal.get("email", ""), org_domain)
    if vis == "public":
        scope = "external"
    rid = _resource_id(tool, args)
    cls = spec.resource_class
    if cls == "document" and rid is not None and rid in world.documents:
        sens = world.documents[rid].sensitivity
    elif cls == "document":
        sens = "unknown"
    else:
        sens = _SENSITIVITY.get(cls, "unknown")
    return {
        "action_semantic": verb,
        "resource_class": cls,
        "resource_id": rid,
        "sensitivity_label": sens,
        "principal_scope": scope if spec.mutates or spec.kind == "agent" else "self",
        "direction": "external" if scope == "external" else "internal",
        "target_principal": ",".join(recips) if recips else None,
    }
