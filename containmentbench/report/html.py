"""Small HTML building blocks for the static report: one stylesheet, page shell, tables.

No template engine, no JavaScript library and no external URL: every page is plain HTML5 with
an inline stylesheet, so the report opens from the file system in any browser, offline.

Every page carries a Content-Security-Policy (:func:`csp`) that allows only what the page
uses: the one stylesheet by its sha256, images from the report's own folder on a page that
shows figures, the page's own inline script by its sha256 (only the rollout index has one),
and nothing else (no connection, no form, no ``<base>``, no script from a file or a URL), so
text that escaped the escaping still could not load or run anything.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222}
header{background:#1f2d3d;color:#fff;padding:10px 20px}
header a{color:#cde;margin-right:14px;text-decoration:none}
header .title{font-weight:600;font-size:16px;margin-right:24px}
main{padding:8px 24px;max-width:1400px;box-sizing:border-box}
h1{font-size:19px;margin:6px 0}
h2{font-size:17px;margin:18px 0 6px}h3{font-size:15px;margin:14px 0 4px}
.sim{background:#fff3cd;border:1px solid #e0c36a;padding:3px 10px;margin:4px 0;font-style:italic;font-size:12.5px}
table{border-collapse:collapse;margin:6px 0 18px;font-size:12.5px}
th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f3f5f7;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.na{color:#999;text-align:center}
tr.taint td{background:#fdecea}
caption{caption-side:top;text-align:left;color:#444;padding:4px 0;max-width:1100px}
.hash{font-family:ui-monospace,monospace;font-size:11px;color:#666;overflow-wrap:anywhere}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.pair>div{border:1px solid #ccd;padding:6px 10px;border-radius:4px;overflow-x:auto}
figure{margin:10px 0 24px}
figure img{max-width:100%;border:1px solid #eee}
pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;font-size:12px;max-width:1100px;overflow-wrap:anywhere}
.tbox{overflow:auto;max-height:520px;max-width:100%;border:1px solid #eee;margin:4px 0 14px;container-type:inline-size}
.tbox table{margin:0}
.tbox caption{position:sticky;left:0;max-width:min(1100px,calc(100cqw - 8px))}
.pairfig{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,560px);gap:16px;align-items:start}
.pairfig figure{margin:4px 0}
.question{font-size:15px;margin:4px 0}.question b{color:#1f2d3d}
.hl-fig img{max-height:440px;max-width:100%;display:block;margin:0 auto}
.hl-fig{margin:2px 0}
table.findings td,table.findings th{font-size:12.5px;padding:2px 8px}
table.findings td{white-space:nowrap}
.models{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:16px}
table.findings a{text-decoration:none}
.small{font-size:11px;color:#666}
ul.sentences{margin:6px 0 10px;padding-left:20px}ul.sentences li{margin:2px 0}
details>summary{cursor:pointer;color:#1f4f7f}
td details pre{margin:2px 0}
.filters label{margin-right:12px}.filters select,.filters input{font-size:12.5px}
#ri-table th{cursor:pointer;user-select:none}
.pager button{margin:0 4px}
svg.trace-graph path.edge{fill:none;stroke:#999;stroke-width:.9;marker-end:url(#arr)}
svg.trace-graph path.edge.taint{stroke:#c0392b;stroke-width:1.6;marker-end:url(#arrT)}
svg.trace-graph line.lane{stroke:#eee}
svg.trace-graph text{font-size:11px;fill:#222}
svg.trace-graph text.lane{font-size:10px;fill:#444;text-anchor:middle}
svg.trace-graph g.in-closure text{fill:#c0392b}
svg.trace-graph text.legend{font-size:10px;fill:#555}
.graph{overflow-x:auto;border:1px solid #eee;margin:8px 0}
nav.toc a{margin-right:12px}
.ok{color:#1e7e34;font-weight:600}.fail{color:#b02a37;font-weight:600}
.invalid{background:#b02a37;color:#fff;padding:8px 14px;margin:6px 0 8px;border-radius:4px}
.invalid b{font-size:15px}.invalid ul{margin:4px 0 0;padding-left:20px}
td.unmeasured{color:#b02a37;font-style:italic;text-align:center}
td{overflow-wrap:break-word}td.detail{min-width:260px;max-width:640px}
a.gl{color:inherit;text-decoration:underline dotted}
.story{border:2px solid #b02a37;background:#fff5f5;padding:6px 14px;margin:6px 0 12px;border-radius:4px;max-width:1100px}
.story.contained{border-color:#1e7e34;background:#f3fbf5}.story.neutral{border-color:#888;background:#f7f7f7}
.story h2{margin:2px 0 6px}.story dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 14px;margin:4px 0}
.story dt{font-weight:600;color:#444}.story dd{margin:0;overflow-wrap:anywhere}
tr.violation td{background:#f5b7b1;font-weight:600}tr.contained td{background:#c8e6c9;font-weight:600}
svg.trace-graph g.violation text{fill:#7b241c;font-weight:700}
svg.trace-graph g.contained text{fill:#1e7e34;font-weight:700}
dl.glossary dt{font-weight:600;margin-top:10px}dl.glossary dd{margin:2px 0 0 18px}
.filters{display:flex;flex-wrap:wrap;gap:4px 0}
"""


STYLE_SOURCE = "'sha256-" + base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode() + "'"


def source_hash(text: str) -> str:
    """A CSP hash source (``'sha256-...'``) of an inline element's exact text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp(images: bool, scripts: Sequence[str] = ()) -> str:
    """The page's policy. ``'self'`` on a ``file://`` page is the ``file:`` scheme in Chromium
    (the report's figures are local files next to the page). ``scripts``: the texts of the
    page's inline scripts, allowed by their sha256 only."""
    return "; ".join(["default-src 'none'", f"style-src {STYLE_SOURCE}",
                      *(["img-src 'self'"] if images else []),
                      *([f"script-src {' '.join(source_hash(x) for x in scripts)}"]
                        if scripts else []),
                      "base-uri 'none'", "form-action 'none'"])


NAV = (("index.html", "Headline"), ("index.html#tables", "Tables"),
       ("rollouts.html", "Rollouts"), ("drilldown.html", "Drill-down"),
       ("cases.html", "Case studies"), ("glossary.html", "Glossary"),
       ("index.html#record", "Seeds and versions"))


def page(title: str, body: str, *, root: str = "", sim_note: str | None = None,
         scripts: Sequence[str] = (), data: str = "",
         nav_links: Sequence[tuple[str, str]] | None = None) -> str:
    """A page. ``scripts``: inline script texts (hashed into the CSP); ``data``: a JSON data
    block (``<script type="application/json">``, never executed; its text must come from
    :func:`json_block`); ``nav_links``: the header's (href, label) pairs when the page is not
    a run's report page."""
    links = NAV if nav_links is None else nav_links
    nav = "".join(f'<a href="{root}{href}">{escape(label)}</a>' for href, label in links)
    note = f'<div class="sim">{escape(sim_note)}</div>' if sim_note else ""
    # every value in ``body`` is escaped, so an ``<img`` there is one this module's callers
    # wrote: only then may the page load images
    policy = csp(images="<img " in body, scripts=scripts)
    tail = "".join(f"<script>{x}</script>" for x in scripts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f'<header><span class="title">ContainmentBench</span>{nav}</header>'
            f"<main><h1>{escape(title)}</h1>{note}{body}</main>{data}{tail}</body></html>\n")


def json_block(element_id: str, obj: Any) -> str:
    """A JSON data block that cannot end early: ``<``, ``>`` and ``&`` as JSON escapes, so
    no ``</script>`` or ``<!--`` can appear in it whatever the data holds."""
    import json

    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{escape(element_id)}">{text}</script>'


def text(v: Any) -> str:
    """Element text: ``<``, ``>`` and ``&`` escaped (quotes need no escape outside an
    attribute, and a trace page holds thousands of them)."""
    return escape(str(v), quote=False)


def cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return '<td class="na">N/A</td>'
    if isinstance(v, bool):
        return f"<td>{v}</td>"
    if isinstance(v, float):
        return f'<td class="num">{v:.4f}</td>'
    if isinstance(v, int):
        return f'<td class="num">{v}</td>'
    if isinstance(v, list):
        return f"<td>{text('; '.join(map(str, v)))}</td>"
    return f"<td>{text(v)}</td>"


def th(c: str, root: str = "") -> str:
    """A header cell in the glossary's display name; a column that names a metric links to
    its entry on the report's glossary page (``glossary.html#g-<key>``), with the key and
    the paper's equation as the tooltip."""
    from containmentbench.metrics.glossary import TERMS, key_of

    key = key_of(c)
    if key is None:
        return f"<th>{escape(c)}</th>"
    t = TERMS[key]
    tip = f"{c}: {t.definition} (paper 000 {t.equation})" if t.equation else f"{c}: {t.definition}"
    return (f'<th title="{escape(tip)}"><a class="gl" href="{escape(root)}glossary.html#g-'
            f'{escape(key)}">{escape(t.display)}</a></th>')


#: counters of rows left out of a row's numbers (provider errors, context overflow, N/A
#: cells, unmatched pairs): shown after the metric columns in the report's tables
_EXCLUSION = re.compile(r"(^|_)excluded_|^unmatched$|^not_both_completed$|(^|_)na$")


def is_exclusion(column: str) -> bool:
    return bool(_EXCLUSION.search(column))


def metric_first(columns: Sequence[str]) -> list[str]:
    """``columns`` with the exclusion counters moved after every other column (each group
    keeps its order)."""
    return ([c for c in columns if not is_exclusion(c)]
            + [c for c in columns if is_exclusion(c)])


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "",
          extra: Sequence[str] = (), extra_cells: Iterable[Sequence[str]] | None = None,
          table_id: str = "", row_class: Iterable[str] | None = None,
          cls: str = "", root: str = "", box: bool = False) -> str:
    """An HTML table; ``extra`` columns take pre-rendered HTML cells (links). Headers that
    name a metric show its display name (``metrics/glossary.py``) linked to the glossary
    page (``root``: the path from the page to the report folder). ``box``: inside a box
    that scrolls, so a wide table never widens the page."""
    head = "".join(th(c, root) for c in [*columns, *extra])
    ex = list(extra_cells) if extra_cells is not None else None
    rc = list(row_class) if row_class is not None else None
    body = []
    for i, r in enumerate(rows):
        rcls = f' class="{rc[i]}"' if rc and rc[i] else ""
        tail = "".join(ex[i]) if ex else ""
        body.append(f"<tr{rcls}>" + "".join(cell(v) for v in r) + tail + "</tr>")
    tid = f' id="{escape(table_id)}"' if table_id else ""
    tid += f' class="{escape(cls)}"' if cls else ""
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    out = f"<table{tid}>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="tbox">{out}</div>' if box else out


def link(href: str, text: str, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<a{c} href="{escape(href)}">{escape(text)}</a>'
