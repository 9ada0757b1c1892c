"""Builds the stage-structured trace of one rollout while it runs.

Every logged node gets the union of the labels of its taint-propagating parents plus its own
labels, so a node's label set is its membership in the taint closure of eq. 2 (paper 000
§3.5: "a node is counted as tainted iff its recorded label set intersects the taint-label
vocabulary"). Structural edges (the per-agent ``next`` order, session boundaries, delegation
links) and audit edges (proposal -> decision) are recorded but do not propagate labels; they
widen the structural reach used as the denominator of eq. 4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

TAINT_PREFIX = "taint:"

Link = tuple[int, str]  # (parent seq, edge kind)


def is_tainted(labels: Iterable[str]) -> bool:
    return any(lab.startswith(TAINT_PREFIX) for lab in labels)


class Recorder:
    """Events and edges of one rollout, with incremental taint labels."""

    __slots__ = ("edges", "events", "labels", "last_by_instance", "rollout_id", "session",
                 "tick")

    def __init__(self, rollout_id: str) -> None:
        self.rollout_id = rollout_id
        self.events: list[dict[str, Any]] = []
        self.edges: list[tuple[int, int, str, bool]] = []
        self.labels: list[frozenset[str]] = []
        self.last_by_instance: dict[str, int] = {}
        self.session = 1
        self.tick = 0

    def add(self, kind: str, *, agent: Any = None, flows: Sequence[Link] = (),
            links: Sequence[Link] = (), labels: Iterable[str] = (), **fields: Any) -> int:
        """Append one node; ``flows`` propagate taint, ``links`` are structural or audit."""
        seq = len(self.events)
        own = frozenset(labels)
        edges = self.edges
        parents = []
        for parent, ekind in flows:
            parents.append(self.labels[parent])
            edges.append((parent, seq, ekind, True))
        for parent, ekind in links:
            edges.append((parent, seq, ekind, False))
        if agent is not None:
            inst = agent.instance
            prev = self.last_by_instance.get(inst)
            if prev is not None:
                edges.append((prev, seq, "next", False))
            self.last_by_instance[inst] = seq
            fields["agent_id"] = agent.agent_id
            fields["agent_instance"] = inst
            fields.setdefault("delegation_id", agent.delegation_id)
            fields.setdefault("delegation_parent_id", agent.delegation_parent_id)
            fields.setdefault("principal_id", agent.principal_id)
            fields.setdefault("binding", "bound" if agent.delegation_id else "unbound")
        # the union of own and inherited labels; a node with one parent and no labels of its
        # own shares the parent's set (same value, no copy: most nodes are like this)
        if not parents:
            frozen = own
        elif len(parents) == 1 and not own:
            frozen = parents[0]
        else:
            frozen = own.union(*parents)
        self.labels.append(frozen)
        fields["seq"] = seq
        fields["kind"] = kind
        fields["session"] = self.session
        fields["tick"] = self.tick
        self.tick += 1
        self.events.append(fields)
        return seq

    def tainted(self, seq: int) -> bool:
        return is_tainted(self.labels[seq])

    def columns(self, names: Sequence[str]) -> dict[str, list[Any]]:
        """Event columns in schema order (labels and trust filled from the label sets).
        Built column by column (one comprehension per column rather than a branch per
        event and column: this ran once per event in every shard write)."""
        rid = self.rollout_id
        evs = self.events
        cols: dict[str, list[Any]] = {}
        for n in names:
            if n == "rollout_id":
                cols[n] = [rid] * len(evs)
            elif n == "event_id":
                cols[n] = [f"{rid}:{ev['seq']}" for ev in evs]
            elif n == "labels":
                memo: dict[frozenset[str], list[str]] = {}  # label sets repeat along a chain
                cols[n] = [memo[lab] if lab in memo else memo.setdefault(lab, sorted(lab))
                           for lab in self.labels]
            elif n == "trust":
                cols[n] = ["untrusted" if is_tainted(lab) else "trusted" for lab in self.labels]
            else:
                cols[n] = [ev.get(n) for ev in evs]
        return cols

    def edge_columns(self) -> dict[str, list[Any]]:
        rid = self.rollout_id
        return {"rollout_id": [rid] * len(self.edges),
                "src": [e[0] for e in self.edges], "dst": [e[1] for e in self.edges],
                "kind": [e[2] for e in self.edges],
                "propagates_taint": [e[3] for e in self.edges]}

