"""Delegation lineage closure (paper 002 §2.1 G_auth, §5.3, invariant I3).

``R_lineage`` is the set of ``(parent, child)`` pairs recorded at minting time by the gateway
(``delegation_parent_id``). It is a DAG because the gateway mints a child only after its
parent exists (gateway.py); here it is a forest since each delegation has one parent. The
closure gives ``Ancestors(d)`` and ``Descendants(d)``; "all actions under d including
descendants" is the event set of ``{d} ∪ Descendants(d)``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

import polars as pl

from containmentbench.errors import BenchError


class Lineage:
    """Parent/children maps over a set of delegations (one family or a whole store)."""

    __slots__ = ("children", "parent")

    def __init__(self, parent: Mapping[str, str | None]) -> None:
        self.parent = dict(parent)
        self.children: dict[str, list[str]] = {d: [] for d in self.parent}
        for d, p in self.parent.items():
            if p is not None and p in self.children:
                self.children[p].append(d)
        for kids in self.children.values():
            kids.sort()

    @classmethod
    def from_frame(cls, side: pl.DataFrame) -> Lineage:
        return cls(dict(zip(side["delegation_id"].to_list(),
                            side["delegation_parent_id"].to_list())))

    def _known(self, d: str) -> None:
        if d not in self.parent:
            raise BenchError(f"unknown delegation '{d}'", field="delegation")

    def ancestors(self, d: str) -> list[str]:
        """Nearest first; stops at a parent that was never minted here (kept, flagged)."""
        self._known(d)
        out: list[str] = []
        seen = {d}
        p = self.parent[d]
        while p is not None:
            if p in seen:  # a cycle would violate the DAG assumption of §2.1
                raise BenchError(f"lineage cycle through '{p}'", field="delegation_parent_id")
            out.append(p)
            seen.add(p)
            p = self.parent.get(p)
        return out

    def descendants(self, d: str) -> list[str]:
        """Breadth-first order."""
        self._known(d)
        out: list[str] = []
        q = deque(self.children[d])
        while q:
            c = q.popleft()
            out.append(c)
            q.extend(self.children.get(c, ()))
        return out

    def closure(self, d: str) -> list[str]:
        return [d, *self.descendants(d)]

    def depth_below(self, d: str) -> dict[str, int]:
        """Distance from ``d`` for each delegation of its closure (0 for ``d`` itself)."""
        out = {d: 0}
        q = deque([d])
        while q:
            x = q.popleft()
            for c in self.children.get(x, ()):
                out[c] = out[x] + 1
                q.append(c)
        return out

    def roots(self) -> list[str]:
        return sorted(d for d, p in self.parent.items() if p is None or p not in self.parent)


def roots_of(parent: Mapping[str, str | None]) -> dict[str, str]:
    """Root of every delegation (memoized walk up the forest)."""
    root: dict[str, str] = {}
    for d in parent:
        path = []
        x: str | None = d
        while x is not None and x not in root and x in parent:
            path.append(x)
            x = parent[x]
            if len(path) > len(parent):
                raise BenchError(f"lineage cycle through '{d}'", field="delegation_parent_id")
        top = root[x] if x is not None and x in root else path[-1]
        for y in path:
            root[y] = top
    return root


def depths(parent: Mapping[str, str | None], ids: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in ids:
        n, x = 0, parent.get(d)
        while x is not None and x in parent:
            n += 1
            x = parent[x]
        out[d] = n
    return out
