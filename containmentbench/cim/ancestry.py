"""Causal ancestry of an event across delegation boundaries (paper 002 §5.5 Q3, §5.2, §5.3).

Q3 asks which causal subgraph produced an externalization. Two sources answer it, and they
are reported apart so an analyst sees what each contributes:

* **Trace ancestry** (G_exec, §4.1). Spans form a tree: a tool call under its agent's span, a
  sub-agent's span under the tool call that delegated to it (project.py). An agent's later
  calls depend on the observations of its earlier ones (the model sees them in its context),
  and a sub-agent's work depends on what its caller had observed when it delegated. So the
  *upstream* of an event e is every span that happened before e inside the subtree of one of
  e's ancestors: walking from e to the root, each ancestor span A and, under A's parent, the
  earlier siblings of A with their subtrees (their results returned before A started). A
  chain of parent links alone (``parent_span_id``) misses all of it: reads are siblings of
  the share, never its ancestors.
* **Lineage ancestry** (R_lineage, §5.3, I3). Without any trace (fragmented runtimes,
  untraced tools), CIM still links a child delegation to its parent: the reads of each
  ancestor delegation made before it minted the next delegation on the path to e, and the
  reads of e's own delegation before e. This needs only ``delegation_id``,
  ``delegation_parent_id`` and the minting rows, so it crosses runtimes where traces break.

"Before" is (time, file position): exported rows are in emission order, so ties of the
logical clock keep the order the gateway saw.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

READ_VERBS = ("read", "search", "enumerate")
PRIMARY_KINDS = ("proposal", "delegate")  # the row that stands for a span


@dataclass(frozen=True, slots=True)
class Upstream:
    trace_events: tuple[str, ...]      # upstream events by trace ancestry (nearest first)
    trace_reads: tuple[str, ...]       # read events among them
    lineage_reads: tuple[str, ...]     # read events by lineage ancestry


class SpanForest:
    """Spans of a set of rows: start order, parent, children, member rows."""

    def __init__(self, rows: pl.DataFrame) -> None:
        self.parent: dict[str, str | None] = {}
        self.start: dict[str, tuple[Any, int]] = {}
        self.members: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows.iter_rows(named=True):
            s = r["span_id"]
            if s is None:
                continue
            key = (r["time"], r["_pos"])
            self.members[s].append(r)
            if s not in self.start or key < self.start[s]:
                self.start[s] = key
            if r["parent_span_id"] is not None or s not in self.parent:
                self.parent[s] = r["parent_span_id"]
        self.children: dict[str, list[str]] = defaultdict(list)
        for s, p in self.parent.items():
            if p is not None:
                self.children[p].append(s)

    def subtree(self, s: str, before: tuple[Any, int]) -> list[str]:
        out, stack = [], [s]
        while stack:
            x = stack.pop()
            if x not in self.start or self.start[x] >= before:
                continue
            out.append(x)
            stack.extend(self.children.get(x, ()))
        return out

    def upstream(self, span: str, at: tuple[Any, int]) -> list[str]:
        """Spans upstream of an event of ``span`` at ``at`` (module docstring), nearest
        first: the event's own span's earlier children, then each ancestor level."""
        out: list[str] = []
        seen = {span}
        node: str | None = span
        bound = at
        while node is not None:
            for c in sorted(self.children.get(node, ()), key=lambda x: self.start.get(x, at),
                            reverse=True):
                if c not in seen:
                    out += [x for x in self.subtree(c, bound) if x not in seen]
            seen.update(out)
            parent = self.parent.get(node)
            if parent is not None and parent not in seen:
                out.append(parent)
                seen.add(parent)
            bound = self.start.get(node, bound)
            node = parent
        return out


def _reads(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["event_kind"] == "proposal"
            and r["action_semantic"] in READ_VERBS]


def by_delegation(rows: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows.iter_rows(named=True):
        if r["delegation_id"] is not None:
            out[r["delegation_id"]].append(r)
    return out


def upstream_of(event: dict[str, Any], forest: SpanForest,
                by_d: dict[str, list[dict[str, Any]]], parent: dict[str, str | None],
                minted: dict[str, tuple[Any, int]]) -> Upstream:
    """Upstream events and reads of one event by trace and by lineage ancestry."""
    at = (event["time"], event["_pos"])
    trace_events: list[str] = []
    trace_reads: list[str] = []
    if event["span_id"] is not None:
        for s in forest.upstream(event["span_id"], at):
            mem = sorted(forest.members[s], key=lambda r: (r["time"], r["_pos"]))
            mem = [r for r in mem if (r["time"], r["_pos"]) < at]
            trace_events += [r["event_id"] for r in mem]
            trace_reads += [r["event_id"] for r in _reads(mem)]
    lineage: list[str] = []
    d: str | None = event["delegation_id"]
    cutoff = at
    seen: set[str] = set()
    while d is not None and d not in seen:
        seen.add(d)
        lineage += [r["event_id"] for r in _reads(by_d.get(d, ()))
                    if (r["time"], r["_pos"]) < cutoff]
        cutoff = minted.get(d, cutoff)
        d = parent.get(d)
    return Upstream(tuple(trace_events), tuple(trace_reads), tuple(lineage))


CAUSAL_LINKS = ("invocation",)  # a read's proposal -> its result (a link, not a taint flow)


def recorded_upstream_reads(events: pl.DataFrame, edges: pl.DataFrame
                            ) -> dict[str, set[str]]:
    """Ground truth for Q3 from the runtime's own trace graph (never from CIM fields): for
    each proposal, the read proposals that reach it over information-flow edges (taint
    flows, plus a read's invocation link to its result). Event ids -> upstream read ids."""
    out: dict[str, set[str]] = {}
    ev = events.select("rollout_id", "seq", "event_id", "kind", "action_semantic")
    causal = edges.filter(pl.col("propagates_taint") | pl.col("kind").is_in(CAUSAL_LINKS))
    back_all = causal.partition_by("rollout_id", as_dict=True)
    for (rid,), part in ev.partition_by("rollout_id", as_dict=True).items():
        ids = dict(zip(part["seq"].to_list(), part["event_id"].to_list()))
        reads = {s for s, k, a in zip(part["seq"], part["kind"], part["action_semantic"])
                 if k == "proposal" and a in READ_VERBS}
        back: dict[int, list[int]] = defaultdict(list)
        e = back_all.get((rid,))
        if e is not None:
            for s, d in zip(e["src"].to_list(), e["dst"].to_list()):
                back[d].append(s)
        for s, k in zip(part["seq"].to_list(), part["kind"].to_list()):
            if k != "proposal":
                continue
            seen, stack = set(), list(back.get(s, ()))
            while stack:
                x = stack.pop()
                if x in seen:
                    continue
                seen.add(x)
                stack.extend(back.get(x, ()))
            out[ids[s]] = {ids[x] for x in seen & reads}
    return out
