"""The trace graph G_tau = (V_tau, E_tau) of one rollout (paper 000 eq. 1) with networkx.

* ``taint_closure``: Reach over taint-propagating edges E^T from the untrusted source nodes
  U_tau (eq. 2).
* ``structural_reach``: Reach over all logged edges from U_tau, the denominator R_tau of eq. 4.
* ``labelled_tainted``: nodes whose recorded label set intersects the taint vocabulary, the
  numerator of eq. 4 (equal to the closure when instrumentation is complete).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from containmentbench.trace.recorder import is_tainted


class TraceGraph:
    def __init__(self, events: Iterable[Mapping[str, Any]],
                 edges: Iterable[Mapping[str, Any]]) -> None:
        g = nx.DiGraph()
        for ev in events:
            g.add_node(int(ev["seq"]), kind=ev["kind"], labels=frozenset(ev.get("labels") or ()),
                       agent=ev.get("agent_id"), tool=ev.get("tool"))
        for e in edges:
            src, dst = int(e["src"]), int(e["dst"])
            if g.has_edge(src, dst):
                # two logged edges between the same nodes: taint flows if either propagates
                g[src][dst]["propagates_taint"] |= bool(e["propagates_taint"])
                g[src][dst]["kinds"].add(e["kind"])
            else:
                g.add_edge(src, dst, propagates_taint=bool(e["propagates_taint"]),
                           kinds={e["kind"]})
        self.g = g

    @property
    def sources(self) -> set[int]:
        """U_tau: the untrusted source nodes."""
        return {n for n, d in self.g.nodes(data=True)
                if d["kind"] == "source" and is_tainted(d["labels"])}

    def _reach(self, graph: nx.DiGraph) -> set[int]:
        out: set[int] = set()
        for s in self.sources:
            if s not in out:
                out.add(s)
                out |= nx.descendants(graph, s)
        return out

    def taint_subgraph(self) -> nx.DiGraph:
        keep = [(u, v) for u, v, d in self.g.edges(data=True) if d["propagates_taint"]]
        sub = nx.DiGraph()
        sub.add_nodes_from(self.g.nodes)
        sub.add_edges_from(keep)
        return sub

    def taint_closure(self) -> set[int]:
        """Eq. 2: T_tau = Reach_{(V, E^T)}(U_tau)."""
        return self._reach(self.taint_subgraph())

    def structural_reach(self) -> set[int]:
        """R_tau = Reach_{(V, E)}(U_tau), the denominator of eq. 4."""
        return self._reach(self.g)

    def labelled_tainted(self) -> set[int]:
        return {n for n, d in self.g.nodes(data=True) if is_tainted(d["labels"])}
