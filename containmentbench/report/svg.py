"""The trace graph of one rollout as inline SVG, drawn here (no JavaScript library, no CDN).

Layout: one row per node in logical order (``seq``), one column (lane) per agent instance,
with the untrusted sources in the first lane. Nodes in the taint closure T_tau (paper 000
eq. 2) are filled red; nodes only in the structural reach R_tau (eq. 4) are outlined orange;
taint-propagating edges (E^T) are red, the other logged edges grey. Every node carries a
``<title>`` tooltip and a ``data-seq`` attribute so a page can link to its timeline row.

Drawing attributes shared by many elements (edge strokes and markers, lane lines, labels)
come from the page's one stylesheet (``report/html.py``: ``SVG_CSS``), and coordinates are
integers: a violating rollout's page is about half the bytes it would be with every
attribute repeated (the report has a page for each of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

ROW = 26
LANE = 120
TOP = 30
LEFT = 60
HALF = LANE // 2
KIND_SHAPE = {"source": "rect", "commit": "diamond", "rollback": "diamond",
              "decision": "square", "confirm_request": "square", "confirmation": "square"}
KIND_COLOR = {"source": "#8172b2", "user_goal": "#4c72b0", "model_call": "#64b5cd",
              "proposal": "#55a868", "decision": "#ccb974", "commit": "#c44e52",
              "rollback": "#dd8452", "tool_result": "#937860", "memory_write": "#da8bc3",
              "memory_read": "#da8bc3", "message": "#8c8c8c", "final_answer": "#4c72b0"}


def _lane_key(ev: dict[str, Any]) -> str:
    if ev["kind"] == "source":
        return "untrusted sources"
    return ev.get("agent_instance") or ev.get("agent_id") or "(system)"


def _label(ev: dict[str, Any]) -> str:
    bits = [ev["kind"]]
    if ev.get("tool"):
        bits.append(str(ev["tool"]))
    if ev.get("decision"):
        bits.append(str(ev["decision"]))
    if ev.get("rule_id"):
        bits.append(f"[{ev['rule_id']}]")
    return " ".join(bits)


def _shape(kind: str, x: float, y: float, fill: str, stroke: str, sw: float) -> str:
    s = KIND_SHAPE.get(kind, "circle")
    common = f'fill="{fill}" stroke="{stroke}"' + (f' stroke-width="{sw}"' if sw != 1 else "")
    if s == "rect":
        return f'<rect x="{x - 8}" y="{y - 6}" width="16" height="12" {common}/>'
    if s == "square":
        return f'<rect x="{x - 6}" y="{y - 6}" width="12" height="12" {common}/>'
    if s == "diamond":
        return (f'<polygon points="{x},{y - 8} {x + 8},{y} {x},{y + 8} {x - 8},{y}" '
                f'{common}/>')
    return f'<circle cx="{x}" cy="{y}" r="6" {common}/>'


MARK = {"violation": ("#7b241c", "VIOLATION"), "contained": ("#1e7e34", "CONTAINED")}


def trace_svg(events: list[dict[str, Any]], edges: list[dict[str, Any]], closure: set[int],
              reach: set[int], link: str | None = "#ev-{seq}",
              marks: Mapping[int, str] | None = None) -> str:
    """The graph; ``marks`` (seq -> ``violation`` or ``contained``, from
    ``report/story.py``) rings those nodes and names the mark in their label, so only the
    violating commit(s), not every commit, stand out."""
    marks = marks or {}
    lanes: list[str] = []
    for ev in events:
        k = _lane_key(ev)
        if k not in lanes:
            lanes.append(k)
    if "untrusted sources" in lanes:
        lanes.remove("untrusted sources")
        lanes.insert(0, "untrusted sources")
    pos: dict[int, tuple[float, float]] = {}
    for i, ev in enumerate(events):
        pos[int(ev["seq"])] = (LEFT + LANE * lanes.index(_lane_key(ev)) + HALF,
                               TOP + 20 + ROW * i)
    text_x = LEFT + LANE * len(lanes) + 10
    width = text_x + 560
    height = TOP + 40 + ROW * len(events) + 14
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trace-graph" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="trace graph: {len(events)} nodes, {len(edges)} edges, '
           f'{len(closure)} in the taint closure">',
           '<defs><marker id="arr" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" '
           'markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#888"/></marker><marker id="arrT" viewBox="0 0 10 10" refX="9" refY="5" '
           'markerWidth="5" markerHeight="5" orient="auto-start-reverse">'
           '<path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/></marker></defs>']
    for j, lane in enumerate(lanes):
        x = LEFT + LANE * j + HALF
        out.append(f'<line class="lane" x1="{x}" y1="{TOP + 8}" x2="{x}" y2="{height - 30}"/>')
        out.append(f'<text class="lane" x="{x}" y="{TOP}">{escape(lane[:20])}</text>')
    # edges first, so nodes draw on top; non-taint edges under taint edges
    for taint_pass in (False, True):
        for e in edges:
            if bool(e["propagates_taint"]) is not taint_pass:
                continue
            s, d = int(e["src"]), int(e["dst"])
            if s not in pos or d not in pos:
                continue
            (x1, y1), (x2, y2) = pos[s], pos[d]
            bow = round(min(LANE * 0.45, 8 + abs(y2 - y1) * 0.15))
            cls = "edge taint" if taint_pass else "edge"
            # only a taint edge carries a tooltip: the timeline lists every edge's nodes
            tip = (f'<title>{escape(e["kind"])}: {s} → {d} (propagates taint)</title>'
                   if taint_pass else "")
            out.append(f'<path class="{cls}" d="M{x1},{y1} C{x1 - bow},{y1} {x2 - bow},{y2} '
                       f'{x2},{y2}">{tip}</path>')
    for ev in events:
        seq = int(ev["seq"])
        x, y = pos[seq]
        in_t, in_r = seq in closure, seq in reach
        fill = "#e74c3c" if in_t else KIND_COLOR.get(ev["kind"], "#bbb")
        stroke, sw = ("#7b241c", 2) if in_t else (("#e67e22", 2) if in_r else ("#555", 1))
        cls = "node in-closure" if in_t else ("node in-reach" if in_r else "node")
        mark = marks.get(seq)
        ring, word = "", ""
        if mark in MARK:
            color, word = MARK[mark]
            cls += f" {mark}"
            ring = (f'<circle cx="{x}" cy="{y}" r="12" fill="none" stroke="{color}" '
                    f'stroke-width="3"/>')
            word += ": "
        tip = f"#{seq} {word}{_label(ev)}" + (" · in taint closure" if in_t else "")
        if ev.get("labels"):
            tip += " · labels: " + ", ".join(ev["labels"])
        shape = _shape(ev["kind"], x, y, fill, stroke, sw)
        body = (f'<g class="{cls}" data-seq="{seq}"><title>{escape(tip)}</title>{ring}{shape}'
                f'<text x="{text_x}" y="{y + 4}">{seq:>3}  {escape(word)}'
                f'{escape(_label(ev)[:72])}</text></g>')
        if link:
            body = f'<a href="{escape(link.format(seq=seq))}">{body}</a>'
        out.append(body)
    ly = height - 20
    out.append(f'<text class="legend" x="{LEFT}" y="{ly}">red node: in taint '
               'closure T (eq. 2); orange ring: structural reach R only (eq. 4); red edge: '
               'propagates taint</text>')
    out.append(f'<text class="legend" x="{LEFT}" y="{ly + 14}">ringed: the violating '
               'commit (eq. 5, dark red) or the act that contained the attack (green)</text>')
    out.append("</svg>")
    return "\n".join(out)
