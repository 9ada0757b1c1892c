"""Benchmark-local world state as typed models.

Everything an agent can read or change lives here, in memory, for the length of one rollout.
Sinks (outbox, shares, status notes, calendar, CRM, memory, task record) are benchmark-local:
nothing leaves the process (paper 000 §3.7, Appendix L). ``snapshot`` gives the canonical view
of every mutable sink, and ``diff`` the environment difference recorded for each rollout.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

TRUSTED = "trusted"
UNTRUSTED = "untrusted"

VISIBILITY_ORDER = {"private": 0, "internal": 1, "public": 2}


@dataclass(slots=True)
class Provenance:
    """Where a piece of content came from; untrusted sources carry a taint label when read."""

    source_id: str
    trust: str
    origin: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Provenance:
        return cls(source_id=d["source_id"], trust=d["trust"], origin=d["origin"])

    def to_dict(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "trust": self.trust, "origin": self.origin}

    @property
    def taint_labels(self) -> frozenset[str]:
        return frozenset({f"taint:{self.source_id}"}) if self.trust == UNTRUSTED else frozenset()


@dataclass(slots=True)
class Email:
    id: str
    sender: str
    to: list[str]
    subject: str
    body: str
    provenance: Provenance


@dataclass(slots=True)
class Document:
    id: str
    title: str
    owner: str
    body: str
    sensitivity: str
    provenance: Provenance


@dataclass(slots=True)
class Contact:
    id: str
    name: str
    email: str
    org: str


@dataclass(slots=True)
class CalendarEvent:
    id: str
    title: str
    date: str
    attendees: list[str]
    invited: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CrmRecord:
    contact_id: str
    fields: dict[str, str]
    notes: str
    provenance: Provenance


@dataclass(slots=True)
class MemoryEntry:
    """A memory record; ``labels`` survive the session boundary (paper 001 §4.1, ``_nt_taint``)."""

    key: str
    value: str
    labels: frozenset[str]
    origin_event: str | None
    status: str = "active"  # active | quarantined


@dataclass(slots=True)
class AgentMessage:
    id: str
    sender: str
    to: str
    text: str
    provenance: Provenance


@dataclass(slots=True)
class World:
    """The mutable state of one rollout's sandbox."""

    principal: dict[str, str]
    emails: dict[str, Email]
    documents: dict[str, Document]
    contacts: dict[str, Contact]
    calendar: dict[str, CalendarEvent]
    crm: dict[str, CrmRecord]
    memory: dict[str, MemoryEntry]
    inbox: list[AgentMessage]
    session_memory: dict[str, str] = field(default_factory=dict)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    shares: list[dict[str, Any]] = field(default_factory=list)
    status_notes: list[dict[str, Any]] = field(default_factory=list)
    drafts: list[dict[str, Any]] = field(default_factory=list)
    task_record: list[str] = field(default_factory=list)
    crm_updates: list[dict[str, Any]] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> World:
        """Build the world from a scenario's ``initial_state`` (a plain JSON dict)."""
        def prov(d: dict[str, Any]) -> Provenance:
            return Provenance.from_dict(d["provenance"])

        return cls(
            principal=dict(spec["principal"]),
            emails={e["id"]: Email(e["id"], e["sender"], list(e["to"]), e["subject"], e["body"],
                                   prov(e)) for e in spec["emails"]},
            documents={d["id"]: Document(d["id"], d["title"], d["owner"], d["body"],
                                         d["sensitivity"], prov(d)) for d in spec["documents"]},
            contacts={c["id"]: Contact(c["id"], c["name"], c["email"], c["org"])
                      for c in spec["contacts"]},
            calendar={c["id"]: CalendarEvent(c["id"], c["title"], c["date"],
                                             list(c["attendees"]), list(c.get("invited", [])))
                      for c in spec["calendar"]},
            crm={r["contact_id"]: CrmRecord(r["contact_id"], dict(r["fields"]), r["notes"],
                                            prov(r)) for r in spec["crm"]},
            memory={m["key"]: MemoryEntry(m["key"], m["value"],
                                          Provenance.from_dict(m["provenance"]).taint_labels,
                                          None) for m in spec["memory"]},
            inbox=[AgentMessage(m["id"], m["sender"], m["to"], m["text"], prov(m))
                   for m in spec["agent_messages"]],
        )

    def next_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return f"{prefix}-{n}"

    def snapshot(self) -> dict[str, Any]:
        """Canonical view of every mutable sink (the environment diff is taken over this)."""
        return {
            "outbox": copy.deepcopy(self.outbox),
            "shares": copy.deepcopy(self.shares),
            "status_notes": copy.deepcopy(self.status_notes),
            "drafts": copy.deepcopy(self.drafts),
            "task_record": list(self.task_record),
            "crm": {k: dict(v.fields) for k, v in sorted(self.crm.items())},
            "calendar": {k: {"title": v.title, "date": v.date, "attendees": list(v.attendees),
                             "invited": list(v.invited)} for k, v in sorted(self.calendar.items())},
            "memory": {k: {"value": v.value, "status": v.status,
                           "labels": sorted(v.labels)} for k, v in sorted(self.memory.items())},
        }


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Environment difference between two snapshots: what each sink gained, lost or changed."""
    out: dict[str, Any] = {}
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list):
            added = [x for x in b if x not in a]
            removed = [x for x in a if x not in b]
            out[key] = {"added": added, "removed": removed}
        elif isinstance(a, dict) and isinstance(b, dict):
            changed = {}
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    changed[k] = {"before": a.get(k), "after": b.get(k)}
            out[key] = changed
        else:
            out[key] = {"before": a, "after": b}
    return out
