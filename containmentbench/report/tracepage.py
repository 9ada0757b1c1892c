"""One HTML page per rollout: header, the rollout's own metric values (every column of its
``rollout_metrics`` row, by display name; N/A outside the metric's stage), trace graph (taint
closure highlighted), the timeline with one anchored row per node (long text folded, the
whole of it one click away), and the CIM forensic view (paper 002: the rollout's gateway
events projected to the Common Information Model, and per-delegation lineage and
externalization)."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

from containmentbench.escape import visible
from containmentbench.metrics.glossary import TERMS
from containmentbench.report import html as H
from containmentbench.report.rundir import Rollout
from containmentbench.report.story import box, story
from containmentbench.report.svg import trace_svg
from containmentbench.report.timeline import SIM_NOTE, closure_sets, event_detail

HEADER = ("scenario_id", "stage", "domain", "topology", "memory_mode", "carrier", "attack_goal",
          "model", "backend", "defense", "method_version", "policy_hash", "parser_version",
          "seed", "status", "error", "final_answer")
CIM_COLS = ("event_kind", "delegation_id", "delegation_parent_id", "agent_id", "tool_operation",
            "action_semantic", "direction", "resource_class", "resource_id", "sensitivity_label",
            "target_principal_id", "action_outcome", "delegation_binding")


def cim_view(r: Rollout) -> str:
    from containmentbench.cim.project import project_rows

    cim, _ = project_rows([dict(e, rollout_id=r.id) for e in r.events])
    rows = cim.select(list(CIM_COLS)).to_pylist()
    if not rows:
        return "<p>No gateway events in this rollout.</p>"
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"parent": None, "agents": set(),
                                                          "events": 0, "effects": 0,
                                                          "sensitive": 0, "targets": set()})
    for x in rows:
        d = per[x["delegation_id"] or "(unbound)"]
        d["parent"] = d["parent"] or x["delegation_parent_id"]
        d["agents"].add(x["agent_id"])
        d["events"] += 1
        if x["event_kind"] == "commit":
            d["effects"] += 1
        if x["sensitivity_label"] not in (None, "", "public"):
            d["sensitive"] += 1
        if x["target_principal_id"]:
            d["targets"].add(x["target_principal_id"])
    summary = H.table(
        ["delegation", "parent", "agents", "gateway events", "committed effects",
         "sensitive-resource events", "target principals"],
        [[k, v["parent"], sorted(v["agents"]), v["events"], v["effects"], v["sensitive"],
          sorted(v["targets"])] for k, v in sorted(per.items())],
        caption="Per-delegation lineage and externalization (paper 002 §5: blast radius, "
                "attribution and externalization queries over the CIM).", box=True)
    detail = H.table(list(CIM_COLS), [[x[c] for c in CIM_COLS] for x in rows],
                     caption="The rollout's gateway events in CIM form (paper 002 Table 2).",
                     box=True)
    return summary + detail


SHORT = 160
#: event fields whose whole text a reader may need (the row shows a one-line gist)
LONG_FIELDS = ("text", "args", "evidence", "final_answer", "error")


def metrics_table(m: dict[str, Any] | None, root: str = "../") -> str:
    """The rollout's own metric values, in glossary order, by display name (the key and the
    paper's equation as the row's tooltip); the metrics not defined on its stage are named
    once below the table (Table 5: N/A, never 0)."""
    if m is None:
        return "<p>No metrics row for this rollout.</p>"
    rows, na = [], []
    for k, t in TERMS.items():
        if k not in m:
            continue
        if m[k] is None:
            na.append(t.display)
            continue
        v = m[k]
        v = f"{v:.4f}" if isinstance(v, float) else str(v)
        rows.append(f'<tr><td title="{escape(k)} ({escape(t.equation or "-")})">'
                    f'<a class="gl" href="{escape(root)}glossary.html#g-{escape(k)}">'
                    f"{H.text(t.display)}</a></td><td class=\"num\">{H.text(v)}</td></tr>")
    tail = (f'<p class="small">N/A on this rollout (not defined on its stage, Table 5, or '
            f'a provider error): {H.text(", ".join(na))}.</p>' if na else "")
    return ('<div class="tbox"><table id="rollout-metrics"><caption>This rollout\'s metric values '
            "(metrics/rollout_metrics.parquet); hover a name for its key and equation."
            "</caption><thead><tr><th>metric</th><th>value</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>" + tail)


def detail_cell(ev: dict[str, Any]) -> str:
    """The event's gist; when it was cut, the whole text one click away (escaped, controls
    spelled out as in ``show``)."""
    short = event_detail(ev, SHORT)
    # a model call's args are the tool list it was offered, not what anyone wrote
    fields = [f for f in LONG_FIELDS if not (f == "args" and ev["kind"] == "model_call")]
    full = [(f, ev.get(f)) for f in fields if ev.get(f) not in (None, "", [])]
    whole = "\n".join(f"{f}: {visible(str(v))}" for f, v in full)
    if not short.endswith("…") and len(whole) <= SHORT:
        return f'<td class="detail">{H.text(short)}</td>'
    return (f'<td class="detail"><details><summary>{H.text(short)}</summary>'
            f"<pre>{H.text(whole)}</pre></details></td>")


def render(r: Rollout, root: str = "../", metrics: dict[str, Any] | None = None) -> str:
    """The page: the story first (``report/story.py``: the violating commit, what let it
    through and where the injection entered, or the act that contained the attack), the
    trace graph and timeline with those events marked, then the metric values, the
    rollout's fields and the CIM view."""
    closure, reach = closure_sets(r)
    row = r.row
    told = story(r, metrics)
    back = (f"{root}rollouts.html#defense={row['defense']}&stage={row['stage']}")
    facts = " · ".join(f"{k} <b>{H.text(row.get(k) if row.get(k) is not None else '-')}</b>"
                       for k in ("defense", "scenario_id", "stage", "carrier", "attack_goal",
                                 "domain", "topology", "seed"))
    body = [f'<p class="small">{facts}</p>', box(told),
            f'<p class="hash">{H.link(back, "rollout index (this defense and stage)")} · '
            f'{H.link("#metrics", "metric values")} · {H.link("#fields", "rollout fields")} · '
            f'show it in a terminal: <code>containmentbench show {escape(r.id)} '
            f'--run-dir RUN_DIR</code></p>']
    marks = told.marks
    body.append(f"<p>taint closure |T| = {len(closure)} (eq. 2); structural reach |R| = "
                f"{len(reach)} (eq. 4); events {len(r.events)}; edges {len(r.edges)}"
                + ("; marked: " + ", ".join(f"#{k} {v}" for k, v in sorted(marks.items()))
                   if marks else "") + ".</p>")
    body.append('<h2 id="graph">Trace graph</h2><div class="graph">'
                + trace_svg(r.events, r.edges, closure, reach, marks=marks) + "</div>")
    rows, cls, extra = [], [], []
    for ev in r.events:
        seq = int(ev["seq"])
        rows.append([seq, ev["tick"], ev["kind"], ev.get("agent_id"), ev.get("delegation_id")])
        cls.append(marks.get(seq) or ("taint" if seq in closure else ""))
        mark = {"violation": "VIOLATION", "contained": "CONTAINED"}.get(marks.get(seq, ""), "")
        extra.append([detail_cell(ev), H.cell(ev.get("labels") or []),
                      f'<td id="ev-{seq}">{" ".join(x for x in ("T" if seq in closure else "", mark) if x)}</td>'])
    body.append('<h2 id="timeline">Timeline</h2>' + H.table(
        ["seq", "tick", "kind", "agent", "delegation"], rows,
        extra=["detail (click to expand)", "labels", "in T / mark"], extra_cells=extra,
        row_class=cls, table_id="timeline-table", box=True,
        caption="Every logged node in logical order; red rows are in the taint closure, the "
                "dark red row is a violating commit (eq. 5), the green row the act that "
                "contained the attack."))
    body.append('<h2 id="metrics">Metric values</h2>' + metrics_table(metrics, root))
    body.append('<h2 id="fields">Rollout fields</h2>' + H.table(
        ["field", "value"], [[k, row.get(k)] for k in HEADER],
        caption="The rollout (trace table rollouts).", box=True, root=root))
    body.append('<h2 id="cim">CIM forensic view</h2>' + cim_view(r))
    return H.page(f"Rollout {r.id}: {row['defense']} on {row['scenario_id']} (seed {row['seed']})",
                  "".join(body), root=root, sim_note=SIM_NOTE if row["backend"] == "sim" else None)
