"""Source lineages of one context (paper 001 §3.2, §4.1): which sources reached it, along
which provenance path, through which vias, at which sigma, by which tiers.

The DCPG (``dcpg.py``) builds lineages and the FIDES-style baseline (``ifc.py``) reads them;
both import this module, so the graph can ask the baseline for its verdict without the
baseline importing the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Path_ = tuple[int, ...]


@dataclass
class Lineage:
    """Source lineages in one context: source_id -> (provenance path, vias, sigma, tiers)."""

    paths: dict[str, Path_] = field(default_factory=dict)
    vias: dict[str, frozenset[str]] = field(default_factory=dict)
    sigma: dict[str, float] = field(default_factory=dict)
    tiers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per hop of the path

    def add(self, sid: str, path: Path_, via: Iterable[str], sigma: float = 1.0,
            tiers: tuple[str, ...] = ("content",)) -> None:
        if sid not in self.paths:
            self.paths[sid] = path
            self.vias[sid] = frozenset(via)
            self.sigma[sid] = sigma
            self.tiers[sid] = tiers

    def merge(self, other: Lineage, hop: int | None = None, via: str | None = None,
              tier: str | None = None, sigma: dict[str, float] | None = None) -> None:
        for sid, p in other.paths.items():
            extend = hop is not None and p[-1] != hop
            self.add(sid, (*p, hop) if extend else p,
                     other.vias.get(sid, frozenset()) | ({via} if via else set()),
                     (sigma or other.sigma).get(sid, other.sigma.get(sid, 1.0)),
                     (*other.tiers.get(sid, ()), tier or via or "context") if extend
                     else other.tiers.get(sid, ()))

    def copy(self) -> Lineage:
        return Lineage(dict(self.paths), dict(self.vias), dict(self.sigma), dict(self.tiers))

    def to_json(self) -> dict[str, Any]:
        return {sid: {"path": list(p), "via": sorted(self.vias[sid]),
                      "sigma": round(self.sigma.get(sid, 1.0), 4),
                      "tiers": list(self.tiers.get(sid, ()))}
                for sid, p in sorted(self.paths.items())}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Lineage:
        return cls({k: tuple(v["path"]) for k, v in d.items()},
                   {k: frozenset(v["via"]) for k, v in d.items()},
                   {k: float(v.get("sigma", 1.0)) for k, v in d.items()},
                   {k: tuple(v.get("tiers", ())) for k, v in d.items()})
