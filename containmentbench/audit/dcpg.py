"""Dynamic Context Provenance Graph (paper 001 §4.1), rebuilt offline from one rollout's trace.

Nodes are tool steps (source exposures, memory writes and reads, inter-agent messages and
sinks) annotated with (tool, args, taint set, session); edges carry the source lineage. The
graph does not use the trace's logged taint labels: lineage is recomputed from what each agent
instance observed:

* a step that returns untrusted content (a ``data``/``memory`` edge from a ``source`` node)
  starts the lineage of that source;
* a model call adds everything its ``observe`` edges bring into the agent's context;
* a memory write stores the writer's context lineage with the entry (the ``_nt_taint``
  metadata key of §4.1) and a later read rehydrates it, also in a later session;
* a message carries the sender's context to the receiver (cross-agent reuse).

At a session boundary the registry and graph are saved to disk and reloaded (§4.1 "cross-session
continuity"), so lineage survives exactly as far as the persisted state carries it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TAINT_KEY = "_nt_taint"
Path_ = tuple[int, ...]


@dataclass
class Lineage:
    """Source lineages in one context: source_id -> (provenance path of seqs, vias)."""

    paths: dict[str, Path_] = field(default_factory=dict)
    vias: dict[str, frozenset[str]] = field(default_factory=dict)

    def add(self, sid: str, path: Path_, via: Iterable[str]) -> None:
        if sid not in self.paths:
            self.paths[sid] = path
            self.vias[sid] = frozenset(via)

    def merge(self, other: Lineage, hop: int | None = None, via: str | None = None) -> None:
        for sid, p in other.paths.items():
            self.add(sid, (*p, hop) if hop is not None and p[-1] != hop else p,
                     self.vias_of(other, sid) | ({via} if via else set()))

    @staticmethod
    def vias_of(other: Lineage, sid: str) -> frozenset[str]:
        return other.vias.get(sid, frozenset())

    def copy(self) -> Lineage:
        return Lineage(dict(self.paths), dict(self.vias))

    def to_json(self) -> dict[str, Any]:
        return {sid: {"path": list(p), "via": sorted(self.vias[sid])}
                for sid, p in sorted(self.paths.items())}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Lineage:
        return cls({k: tuple(v["path"]) for k, v in d.items()},
                   {k: frozenset(v["via"]) for k, v in d.items()})


@dataclass
class Sink:
    seq: int
    tool: str
    args: dict[str, Any]
    session: int
    agent_instance: str
    lineage: Lineage


@dataclass
class DCPG:
    """The per-rollout graph plus the persistent registry (memory key -> stored lineage)."""

    rollout_id: str
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # sid -> text, seq
    registry: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> _nt_taint
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[tuple[int, int, str]] = field(default_factory=list)
    sinks: list[Sink] = field(default_factory=list)

    # ---------------------------------------------------------------- persistence
    def to_json(self) -> dict[str, Any]:
        return {"rollout_id": self.rollout_id, "sources": self.sources,
                "registry": {k: {TAINT_KEY: v[TAINT_KEY].to_json(), "seq": v["seq"]}
                             for k, v in sorted(self.registry.items())},
                "nodes": self.nodes, "edges": [list(e) for e in self.edges]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> DCPG:
        g = cls(d["rollout_id"], dict(d["sources"]))
        g.registry = {k: {TAINT_KEY: Lineage.from_json(v[TAINT_KEY]), "seq": v["seq"]}
                      for k, v in d["registry"].items()}
        g.nodes = [dict(n) for n in d["nodes"]]
        g.edges = [tuple(e) for e in d["edges"]]  # type: ignore[misc]
        return g

    def save(self, path: str | Path) -> Path:
        from containmentbench.integrity import writer

        path = Path(path)
        writer.write_text(path, json.dumps(self.to_json(), sort_keys=True), kind="audit-state",
                          sync=False)
        return path

    @classmethod
    def load(cls, path: str | Path) -> DCPG:
        return cls.from_json(json.loads(Path(path).read_text()))


def build(rollout_id: str, events: list[dict[str, Any]], edges: list[dict[str, Any]],
          sources: frozenset[str], sinks: frozenset[str], memory_write: frozenset[str],
          memory_read: frozenset[str], state_dir: str | Path | None = None) -> DCPG:
    """Replay the events in order and build the DCPG (sinks carry their sink-time lineage)."""
    inc: dict[int, list[tuple[int, str]]] = {}
    for e in edges:
        inc.setdefault(e["dst"], []).append((e["src"], e["kind"]))
    by_seq = {e["seq"]: e for e in events}
    g = DCPG(rollout_id)
    node_lin: dict[int, Lineage] = {}
    ctx: dict[str, Lineage] = {}

    def node(ev: dict[str, Any], lin: Lineage) -> None:
        g.nodes.append({"seq": ev["seq"], "kind": ev["kind"], "tool": ev.get("tool"),
                        "session": ev["session"], "agent_instance": ev.get("agent_instance"),
                        "taint": sorted(lin.paths)})
        for sid, p in lin.paths.items():
            if len(p) >= 2:
                g.edges.append((p[-2], p[-1], sid))

    for ev in sorted(events, key=lambda e: e["seq"]):
        seq, kind, inst = ev["seq"], ev["kind"], ev.get("agent_instance")
        parents = inc.get(seq, [])
        if kind == "source":
            g.sources[ev["resource_id"]] = {"text": ev.get("text") or "", "seq": seq,
                                            "carrier": ev.get("resource_class")}
            continue
        if kind == "session_start" and state_dir is not None:
            # persist the registry and graph at the boundary and continue from the reloaded copy
            path = Path(state_dir) / f"{rollout_id}.session-{ev['session'] - 1}.json"
            g2 = DCPG.load(g.save(path))
            g2.sinks = g.sinks
            g = g2
            ctx = {}  # a new session starts with fresh agent contexts
            continue
        lin = Lineage()
        for src, ek in parents:
            sev = by_seq.get(src)
            if sev is None:
                continue
            if sev["kind"] == "source" and ek in ("data", "memory"):
                via = "retrieved" if ek == "memory" else "direct"
                lin.add(sev["resource_id"], (src, seq), {via})
            elif sev["kind"] == "memory_write" and ek == "memory":
                stored = g.registry.get(sev.get("resource_id") or "")
                if stored is not None:  # rehydrate the labels persisted with the entry
                    lin.merge(stored[TAINT_KEY], hop=seq, via="memory")
            elif kind == "message" and ek in ("receives", "returns", "sends"):
                lin.merge(node_lin.get(src, Lineage()), hop=seq, via="relay")
        if kind == "message" and inst is not None and any(k == "sends" for _, k in parents):
            lin.merge(ctx.get(inst, Lineage()), hop=seq, via="relay")
        if kind == "message" and any(k == "returns" for _, k in parents):
            child = by_seq[next(s for s, k in parents if k == "returns")].get("agent_instance")
            lin.merge(ctx.get(child, Lineage()), hop=seq, via="relay")
        if kind == "model_call" and inst is not None:
            c = ctx.setdefault(inst, Lineage())
            for src, ek in parents:
                if ek == "observe" and src in node_lin:
                    c.merge(node_lin[src])
            continue
        node_lin[seq] = lin
        tool = ev.get("tool")
        if kind == "memory_write" and tool in memory_write and inst is not None:
            stored = ctx.get(inst, Lineage()).copy()
            stored = Lineage({sid: (*p, seq) for sid, p in stored.paths.items()},
                             dict(stored.vias))
            g.registry[ev.get("resource_id") or ""] = {TAINT_KEY: stored, "seq": seq}
            node(ev, stored)
        elif kind == "memory_read" and (tool in memory_read or tool is None):
            node(ev, lin)
        elif kind == "commit" and tool in sinks and inst is not None:
            c = ctx.get(inst, Lineage())
            sl = Lineage({sid: (*p, seq) for sid, p in c.paths.items()}, dict(c.vias))
            args = json.loads(ev["args"]) if ev.get("args") else {}
            g.sinks.append(Sink(seq, tool, args, ev["session"], inst, sl))
            node(ev, sl)
        elif lin.paths and (tool in sources or kind in ("tool_result", "message")):
            node(ev, lin)
    return g
