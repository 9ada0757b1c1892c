"""Small HTML building blocks for the static report: one stylesheet, page shell, tables.

No template engine, no JavaScript library and no external URL: every page is plain HTML5 with
an inline stylesheet, so the report opens from the file system in any browser, offline.

Every page carries a Content-Security-Policy (:func:`csp`) that allows only what the page
uses: the one stylesheet by its sha256, images from the report's own folder on a page that
shows figures, and nothing else (no script, no connection, no form, no ``<base>``), so text
that escaped the escaping still could not load or run anything.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222}
header{background:#1f2d3d;color:#fff;padding:10px 20px}
header a{color:#cde;margin-right:14px;text-decoration:none}
header .title{font-weight:600;font-size:16px;margin-right:24px}
main{padding:12px 24px;max-width:1400px}
.sim{background:#fff3cd;border:1px solid #e0c36a;padding:6px 10px;margin:8px 0;font-style:italic}
table{border-collapse:collapse;margin:6px 0 18px;font-size:12.5px}
th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f3f5f7;position:sticky;top:0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.na{color:#999;text-align:center}
tr.taint td{background:#fdecea}
caption{caption-side:top;text-align:left;color:#444;padding:4px 0;max-width:1100px}
.hash{font-family:ui-monospace,monospace;font-size:11px;color:#666}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.pair>div{border:1px solid #ccd;padding:6px 10px;border-radius:4px;overflow-x:auto}
figure{margin:10px 0 24px}
figure img{max-width:100%;border:1px solid #eee}
pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;font-size:12px;max-width:1100px}
.graph{overflow-x:auto;border:1px solid #eee;margin:8px 0}
nav.toc a{margin-right:12px}
.ok{color:#1e7e34;font-weight:600}.fail{color:#b02a37;font-weight:600}
"""


STYLE_SOURCE = "'sha256-" + base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode() + "'"


def csp(images: bool) -> str:
    """The page's policy. ``'self'`` on a ``file://`` page is the ``file:`` scheme in Chromium
    (the report's figures are local files next to the page)."""
    return "; ".join(["default-src 'none'", f"style-src {STYLE_SOURCE}",
                      *(["img-src 'self'"] if images else []), "base-uri 'none'",
                      "form-action 'none'"])


def page(title: str, body: str, *, root: str = "", sim_note: str | None = None) -> str:
    nav = "".join(f'<a href="{root}{href}">{escape(label)}</a>' for href, label in (
        ("index.html", "Overview"), ("index.html#tables", "Tables"),
        ("index.html#figures", "Figures"), ("drilldown.html", "Drill-down"),
        ("cases.html", "Case studies"), ("index.html#record", "Seeds and versions")))
    note = f'<div class="sim">{escape(sim_note)}</div>' if sim_note else ""
    # every value in ``body`` is escaped, so an ``<img`` there is one this module's callers
    # wrote: only then may the page load images
    policy = csp(images="<img " in body)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f'<header><span class="title">ContainmentBench</span>{nav}</header>'
            f"<main><h1>{escape(title)}</h1>{note}{body}</main></body></html>\n")


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
        return f"<td>{escape('; '.join(map(str, v)))}</td>"
    return f"<td>{escape(str(v))}</td>"


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "",
          extra: Sequence[str] = (), extra_cells: Iterable[Sequence[str]] | None = None,
          table_id: str = "", row_class: Iterable[str] | None = None) -> str:
    """An HTML table; ``extra`` columns take pre-rendered HTML cells (links)."""
    head = "".join(f"<th>{escape(c)}</th>" for c in [*columns, *extra])
    ex = list(extra_cells) if extra_cells is not None else None
    rc = list(row_class) if row_class is not None else None
    body = []
    for i, r in enumerate(rows):
        cls = f' class="{rc[i]}"' if rc and rc[i] else ""
        tail = "".join(ex[i]) if ex else ""
        body.append(f"<tr{cls}>" + "".join(cell(v) for v in r) + tail + "</tr>")
    tid = f' id="{escape(table_id)}"' if table_id else ""
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f"<table{tid}>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def link(href: str, text: str, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<a{c} href="{escape(href)}">{escape(text)}</a>'
