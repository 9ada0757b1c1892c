"""Deterministic normalization of tool operations to CIM semantics (paper 002 §4.2, App. B.2).

Tier-1 verbs come from each tool's declared verb (read, search, write, share, invite, delete,
move, delegate, ...); Tier-2 qualifiers are derived from tool-native metadata only (the
operation, the target ids, recipient addresses and declared visibility, and the resource's
declared sensitivity), never from payload content (App. B.2 "Mapping guidance").

``principal_scope`` (§4.2 (iv): self / team / org / external) classifies every recipient
against the sandbox's directory (``world.contacts``, the principal's address book): the
principal's own address is ``self``; a directory contact at the organization's domain is
``team``; any other address at that domain ``org``; anything else ``external``. A call's
scope is the broadest of its recipients' (a team mail with one outside cc is external).

Sensitivity of what an agent *composes* (a mail, a draft, a note, a task record, an event):
such a resource has no declared label, and its content is out of scope (no payload
inspection), so it inherits the highest label its delegation has read so far (``inherited``,
kept by the gateway per delegation and passed down the lineage at minting): metadata-only
label propagation, as DLP systems do. Documents and CRM records keep their declared label.
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


LABELS = ("public", "internal", "confidential", "restricted")  # ordered (App. B, §5.4)
SCOPES = ("self", "team", "org", "external")                    # narrowest first
_DECLARED = ("document", "crm_record")  # classes whose resources carry their own label


def recipient_scope(addr: str, world: World, org_domain: str) -> str:
    """One recipient against the directory (module docstring)."""
    a = addr.strip().lower()
    if a == world.principal.get("email", "").lower():
        return "self"
    if not a.endswith("@" + org_domain.lower()):
        return "external"
    team = {c.email.lower() for c in world.contacts.values()}
    return "team" if a in team else "org"


def _scope(recips: list[str], world: World, org_domain: str) -> str:
    if not recips:
        return "self"
    return max((recipient_scope(r, world, org_domain) for r in recips), key=SCOPES.index)


def normalize(tool: str, args: dict[str, Any], world: World, org_domain: str,
              inherited: str | None = None) -> dict[str, Any]:
    """CIM fields for one tool call: Tier-1 ``action_semantic`` and Tier-2 qualifiers;
    ``inherited`` is the highest label the calling delegation has read (module docstring)."""
    spec = TOOLS[tool]
    verb = spec.verb
    vis = args.get("visibility")
    if tool == "post_status_note" and vis == "public":
        verb = "share"  # publishing a note distributes it (App. B.2: share)
    recips = recipients_of(tool, args) if spec.params else []
    scope = _scope(recips, world, org_domain)
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
    if spec.mutates and cls not in _DECLARED and inherited in LABELS and sens in LABELS \
            and LABELS.index(inherited) > LABELS.index(sens):
        sens = inherited
    return {
        "action_semantic": verb,
        "resource_class": cls,
        "resource_id": rid,
        "sensitivity_label": sens,
        "principal_scope": scope if spec.mutates or spec.kind == "agent" else "self",
        "direction": "external" if scope == "external" else "internal",
        "target_principal": ",".join(recips) if recips else None,
    }
