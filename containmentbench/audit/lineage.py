"""Source lineages of one context (paper 001 §3.2, §4.1): which sources reached it, along
which provenance paths, through which vias, at which sigma, by which tiers.

Every path is kept, not only the first: a source can reach one context several ways (the
annotated item read directly, a sentence of it copied into a trusted item, a memory entry or
another store rehydrating it, a relayed message), and which ways exist decides the threshold
(:meth:`Lineage.retrieved`) and whether a runtime label survives (``ifc.py``). Keeping the
first path only made the verdict depend on read order: a trusted item sharing a sentence with
the source, read before the source itself, hid the later direct read.

Paths are kept per *kind* (the set of vias a path went through): one representative route per
kind, the strongest (highest sigma, then shortest, then earliest path). The kinds are what any
verdict reads, and one route per kind keeps a context's lineage bounded (each write-and-read
cycle would otherwise double its routes). The representative is chosen by that order, never by
arrival, so the same set of routes gives the same lineage whatever the order of reads.

The DCPG (``dcpg.py``) builds lineages and the FIDES-style baseline (``ifc.py``) reads them;
both import this module, so the graph can ask the baseline for its verdict without the
baseline importing the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Path_ = tuple[int, ...]

# The semantic threshold each kind of path gets (paper 001 §5.1, "Threshold Setting"):
# * a direct read of the annotated source item by the agent itself (vias ``direct``+``item``):
#   theta_sem = 0.60, "ordinary semantic comparisons";
# * content recovered from memory or another store (``memory``, ``store``, ``retrieved``) or a
#   part of the source copied into another item (``copy``): theta_sem^rag = 0.85, "RAG or
#   memory-retrieved content";
# * content relayed by another agent (``relay``: a delegated task or note received, a
#   worker's result returned): the paper is silent; the audit policy (default_policy.yaml,
#   ``semantic_retrieved``) gives it theta_sem^rag too, since the receiver sees the source
#   second-hand, as from a store.
# A lineage uses the direct threshold when any of its paths is direct (the evidence can be
# explained by the direct read), else the retrieved one.
RETRIEVED_VIAS = frozenset({"memory", "retrieved", "store", "copy", "relay"})


@dataclass(frozen=True)
class Route:
    """One provenance path of a source into a context."""

    path: Path_
    vias: frozenset[str]
    sigma: float = 1.0
    tiers: tuple[str, ...] = ("content",)   # per hop of the path

    @property
    def direct(self) -> bool:
        """The annotated item read in this context (the theta_sem path, module comment)."""
        return not self.vias & RETRIEVED_VIAS

    def rank(self) -> tuple[Any, ...]:
        """Among routes of one kind: the strongest (sigma), then shortest, then earliest."""
        return (-self.sigma, len(self.path), self.path, self.tiers)

    def preference(self) -> tuple[Any, ...]:
        """Across kinds: the route a verdict reports (direct first, the annotated item before
        a copy, fewer vias), then :meth:`rank`; a total order, independent of arrival."""
        return (not self.direct, "item" not in self.vias, len(self.vias),
                tuple(sorted(self.vias)), *self.rank())


@dataclass
class Lineage:
    """Source lineages in one context: source_id -> {kind of path (vias) -> route}."""

    routes: dict[str, dict[frozenset[str], Route]] = field(default_factory=dict)

    def add(self, sid: str, path: Path_, via: Iterable[str], sigma: float = 1.0,
            tiers: tuple[str, ...] = ("content",)) -> None:
        self.put(sid, Route(path, frozenset(via), sigma, tiers))

    def put(self, sid: str, r: Route) -> None:
        kinds = self.routes.setdefault(sid, {})
        old = kinds.get(r.vias)
        if old is None or r.rank() < old.rank():
            kinds[r.vias] = r

    def merge(self, other: Lineage, hop: int | None = None, via: str | None = None,
              tier: str | None = None, sigma: dict[str, float] | None = None) -> None:
        """Every route of ``other``, extended by ``hop`` (through ``via``, by ``tier``);
        ``sigma`` (per source) replaces the routes' sigma (a written value's own evidence)."""
        for sid, kinds in other.routes.items():
            for r in kinds.values():
                extend = hop is not None and r.path[-1] != hop
                s = sigma[sid] if sigma is not None and sid in sigma else r.sigma
                self.put(sid, Route((*r.path, hop) if extend else r.path,
                                    r.vias | ({via} if via else set()), s,
                                    (*r.tiers, tier or via or "context") if extend
                                    else r.tiers))

    def all_routes(self, sid: str) -> list[Route]:
        """Every kind of path of one source, the reported one first."""
        return sorted(self.routes.get(sid, {}).values(), key=Route.preference)

    def primary(self, sid: str) -> Route:
        return self.all_routes(sid)[0]

    def retrieved(self, sid: str) -> bool:
        """No path of the source is a direct read: theta_sem^rag applies (module comment)."""
        return not any(r.direct for r in self.routes.get(sid, {}).values())

    # the reported (primary) route of each source, the views the callers read
    @property
    def paths(self) -> dict[str, Path_]:
        return {sid: self.primary(sid).path for sid in self.routes}

    @property
    def vias(self) -> dict[str, frozenset[str]]:
        return {sid: self.primary(sid).vias for sid in self.routes}

    @property
    def sigma(self) -> dict[str, float]:
        return {sid: self.primary(sid).sigma for sid in self.routes}

    @property
    def tiers(self) -> dict[str, tuple[str, ...]]:
        return {sid: self.primary(sid).tiers for sid in self.routes}

    def copy(self) -> Lineage:
        return Lineage({sid: dict(k) for sid, k in self.routes.items()})

    def to_json(self) -> dict[str, Any]:
        return {sid: [{"path": list(r.path), "via": sorted(r.vias),
                       "sigma": round(r.sigma, 4), "tiers": list(r.tiers)}
                      for r in self.all_routes(sid)]
                for sid in sorted(self.routes)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Lineage:
        lin = cls()
        for sid, rs in d.items():
            for v in rs if isinstance(rs, list) else [rs]:  # one route: the former form
                lin.put(sid, Route(tuple(v["path"]), frozenset(v["via"]),
                                   float(v.get("sigma", 1.0)), tuple(v.get("tiers", ()))))
        return lin
