"""The report's first screen: the headline of ``tables/headline.json`` (analysis/headline.py).

The question, the operating-point figure, the findings table (one row per defense, each
cell an estimate with its 95% scenario-cluster interval, or the rule-of-three bound after
zero events), then the sentences generated from the numbers. A quantity the study did not
measure (``analysis/validity.py``) is announced first, in a red banner, and its cells read
"not measured". A committed-violation cell
links to the rollout index filtered to that defense's violating rollouts, so each of them is
two clicks from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from containmentbench.analysis.headline import NOT_MEASURED, cell, scope_label, unmeasured
from containmentbench.report import html as H

_STAGE_FILTER = {"active_tainted": "active_tainted", "clean": "clean",
                 "memory_recovery": "memory_recovery", "security": "security"}


def findings_table(doc: Mapping[str, Any], root: str = "", table_id: str = "findings",
                   glossary: str | None = None) -> str:
    """The findings table; ``root`` leads to the report holding the rollout index (a
    violation count links to its rollouts), ``glossary`` (default ``root``) to the folder
    holding ``glossary.html``, which every quantity's header links to."""
    gloss = root if glossary is None else glossary
    qs = doc["quantities"]
    by = {(r["defense"], r["metric"]): r for r in doc["findings"]}
    defenses = list(dict.fromkeys(r["defense"] for r in doc["findings"]))
    gated = unmeasured(doc)
    head = "<th>defense</th>" + "".join(
        f'<th title="{escape(q["metric"])}, {escape(q["equation"])}"><a class="gl" href="'
        f'{escape(gloss)}glossary.html#g-{escape(q["metric"])}">{escape(q["display"])}</a>'
        f'<br><span class="small">{escape(scope_label(q["stage"]))}</span></th>' for q in qs)
    rows = []
    for d in defenses:
        tds = [f"<td>{escape(d)}</td>"]
        for q in qs:
            r = by.get((d, q["metric"]))
            if r is None:
                tds.append('<td class="na">N/A</td>')
                continue
            if q["metric"] in gated:
                tds.append(f'<td class="unmeasured">{NOT_MEASURED}</td>')
                continue
            n = f'<span class="small"> n={r["n"]}</span>'
            text = escape(cell(r))
            if q["metric"] == "committed_harm" and r["events"]:
                href = f"{root}rollouts.html#defense={d}&outcome=violation"
                text = (f'<a href="{escape(href)}" title="the {r["events"]} violating '
                        f'rollouts">{text}</a>')
            tds.append(f'<td class="num">{text}{n}</td>')
        rows.append("<tr>" + "".join(tds) + "</tr>")
    return (f'<table id="{escape(table_id)}" class="findings"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def banner(doc: Mapping[str, Any]) -> str:
    """The red banner naming every quantity the study did not measure, and why ("" when it
    measured them all)."""
    gates = doc.get("validity") or ()
    if not gates:
        return ""
    items = "".join(f"<li>{escape(g['sentence'])}</li>" for g in gates)
    return (f'<div class="invalid" role="alert"><b>Not measured: {len(gates)} of the '
            f'headline\'s quantities; no defense is ranked on them.</b><ul>{items}</ul></div>')


def section(doc: Mapping[str, Any], root: str = "", figure: str | None = None,
            links: str = "") -> str:
    """The headline block: the not-measured banner, question, figure, findings table,
    sentences."""
    fig = (f'<figure class="hl-fig"><img src="{escape(figure)}" alt="security-utility '
           'operating points per defense with 95% scenario-cluster intervals"></figure>'
           if figure else "")
    sentences = "".join(f"<li>{escape(s)}</li>" for s in doc["sentences"])
    return (f'<section id="headline">{banner(doc)}'
            f'<p class="question"><b>{escape(doc["question"])}</b> '
            f'<span class="small">{escape(doc["method"])}.</span></p>{fig}'
            + '<div class="tbox">' + findings_table(doc, root) + "</div>" +
            f'<ul class="sentences">{sentences}</ul>{links}</section>')


def side_by_side(docs: Mapping[str, Mapping[str, Any]]) -> str:
    """Cross-model: each model's findings table under its name (models never pooled)."""
    parts = []
    for model, doc in docs.items():
        parts.append(f"<h3>{escape(model)}</h3>" + banner(doc)
                     + findings_table(doc, root=f"../../{escape(model)}/report/",
                                      table_id=f"findings-{model}", glossary="")
                     + '<ul class="sentences">'
                     + "".join(f"<li>{escape(s)}</li>" for s in doc["sentences"][:3])
                     + "</ul>")
    return "".join(parts)


__all__ = ["H", "banner", "findings_table", "section", "side_by_side"]
