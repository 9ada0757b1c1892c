"""The rollout index (``report/rollouts.html``): every rollout of the study, with filter and
sort by defense, stage, scenario, seed, outcome and each headline metric.

The index is a JSON data block in the page (``<script type="application/json">``: never
executed, its ``<``, ``>`` and ``&`` written as JSON escapes) and one small inline script
whose sha256 is the page's only ``script-src`` (``report/html.py``), so it works from
``file://`` with no network: nothing is fetched, nothing outside the report folder is read.
Filters live in the URL fragment (``rollouts.html#defense=none&outcome=violation``), so the
findings table links straight to a filtered list: any violating rollout is two clicks from
the report's first screen. A rollout with a trace page links to it; the others link to it
when the report is served by ``containmentbench report --serve`` (pages made on demand) and
otherwise name the ``containmentbench show`` command.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import polars as pl

from containmentbench.metrics.glossary import TERMS

METRICS = ("committed_harm", "authorized_tainted_action_success", "clean_benign_completion",
           "blast_radius_norm", "recovery_success")
CODED = ("defense", "stage", "scenario", "outcome", "status", "carrier", "attack_goal",
         "domain", "topology")
#: scenario facts a reader filters by (null: "(none)", e.g. no carrier on a clean rollout)
FACETS = ("carrier", "attack_goal", "domain", "topology")
NONE = "(none)"
OUTCOMES = ("violation", "blocked", "no violation", "error")


def outcome(status: str, harm: int | None, block: int | None) -> str:
    """error (never an outcome, Appendix I) > committed violation > policy block > none."""
    if status == "error":
        return "error"
    if harm == 1:
        return "violation"
    return "blocked" if block == 1 else "no violation"


def index_data(df: pl.DataFrame, pages: Collection[str], order: list[str]) -> dict[str, Any]:
    """Columnar, dictionary-coded rows (deterministic: sorted by stage order, defense order,
    scenario, seed)."""
    stage_rank = {s: i for i, s in enumerate(("security", "memory_recovery",
                                               "active_tainted", "clean"))}
    defense_rank = {d: i for i, d in enumerate(order)}
    facets = [c for c in FACETS if c in df.columns]  # older metrics tables lack some
    cols = ["rollout_id", "defense", "stage", "scenario_id", "seed", "status", *METRICS,
            "policy_block", *facets]
    rows = sorted(df.select(cols).iter_rows(named=True), key=lambda r: (
        stage_rank.get(r["stage"], 9), defense_rank.get(r["defense"], 99), r["scenario_id"],
        r["seed"]))
    dicts: dict[str, list[str]] = {k: [] for k in CODED}
    codes: dict[str, dict[str, int]] = {k: {} for k in CODED}

    def code(k: str, v: str) -> int:
        if v not in codes[k]:
            codes[k][v] = len(dicts[k])
            dicts[k].append(v)
        return codes[k][v]

    for k, vals in (("outcome", OUTCOMES), ("defense", order)):
        for v in vals:
            code(k, v)
    out = []
    for r in rows:
        vals: list[Any] = [r["rollout_id"], code("defense", r["defense"]),
                           code("stage", r["stage"]), code("scenario", r["scenario_id"]),
                           r["seed"], code("outcome", outcome(r["status"], r["committed_harm"],
                                                              r["policy_block"])),
                           code("status", r["status"])]
        for m in METRICS:
            v = r[m]
            vals.append(None if v is None or (isinstance(v, float) and math.isnan(v))
                        else round(float(v), 4) if isinstance(v, float) else int(v))
        vals.append(1 if r["rollout_id"] in pages else 0)
        vals += [code(c, NONE if r.get(c) is None else str(r[c])) if c in facets
                 else code(c, NONE) for c in FACETS]
        out.append(vals)
    return {"columns": ["rollout_id", "defense", "stage", "scenario", "seed", "outcome",
                        "status", *METRICS, "page", *FACETS],
            "labels": {m: TERMS[m].display for m in METRICS}, "dict": dicts, "rows": out}


SCRIPT = r"""(function () {
"use strict";
var D = JSON.parse(document.getElementById("rollout-data").textContent);
var C = D.columns, ix = {};
C.forEach(function (c, i) { ix[c] = i; });
var F = {defense: "", stage: "", outcome: "", status: "", seed: "", scenario: "",
         carrier: "", attack_goal: "", domain: "", topology: ""};
var PER = 100, page = 0, sortCol = null, sortDir = 1, shown = [];
var served = location.protocol === "http:" || location.protocol === "https:";
function val(r, c) { var v = r[ix[c]]; return D.dict[c] ? D.dict[c][v] : v; }
function $(id) { return document.getElementById(id); }
function fill(sel, values) {
  values.forEach(function (v) {
    var o = document.createElement("option"); o.value = String(v); o.textContent = String(v);
    sel.appendChild(o);
  });
}
["defense", "stage", "outcome", "status"].forEach(function (k) { fill($("f-" + k), D.dict[k]); });
["carrier", "attack_goal", "domain", "topology"].forEach(function (k) {
  fill($("f-" + k), D.dict[k].slice().sort());
});
var seeds = {}; D.rows.forEach(function (r) { seeds[r[ix.seed]] = 1; });
fill($("f-seed"), Object.keys(seeds).map(Number).sort(function (a, b) { return a - b; }));
function readHash() {
  Object.keys(F).forEach(function (k) { F[k] = ""; });
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var i = kv.indexOf("="); if (i < 1) { return; }
    var k = kv.slice(0, i); if (k in F) { F[k] = decodeURIComponent(kv.slice(i + 1)); }
  });
  Object.keys(F).forEach(function (k) { $("f-" + k).value = F[k]; });
}
function writeHash() {
  var p = [];
  Object.keys(F).forEach(function (k) { if (F[k]) { p.push(k + "=" + encodeURIComponent(F[k])); } });
  var h = "#" + p.join("&");
  try { history.replaceState(null, "", h); } catch (e) { location.hash = h; }
}
function keep(r) {
  for (var k in F) {
    if (!F[k]) { continue; }
    var v = String(val(r, k));
    if (k === "scenario" ? v.indexOf(F[k]) < 0 : v !== F[k]) { return false; }
  }
  return true;
}
function cmp(a, b) {
  var x = val(a, sortCol), y = val(b, sortCol);
  if (x === y) { return 0; }
  if (x === null) { return 1; }
  if (y === null) { return -1; }
  return (x < y ? -1 : 1) * sortDir;
}
function cell(tr, text, cls) {
  var td = document.createElement("td"); td.textContent = text;
  if (cls) { td.className = cls; }
  tr.appendChild(td); return td;
}
function render() {
  shown = D.rows.filter(keep);
  if (sortCol) { shown.sort(cmp); }
  var pages = Math.max(1, Math.ceil(shown.length / PER));
  if (page >= pages) { page = pages - 1; }
  $("ri-count").textContent = shown.length + " of " + D.rows.length + " rollouts";
  $("ri-page").textContent = "page " + (page + 1) + " of " + pages;
  var body = $("ri-body");
  while (body.firstChild) { body.removeChild(body.firstChild); }
  shown.slice(page * PER, (page + 1) * PER).forEach(function (r) {
    var tr = document.createElement("tr"), id = r[ix.rollout_id];
    var td = document.createElement("td");
    if (r[ix.page] === 1 || served) {
      var a = document.createElement("a");
      a.href = "rollouts/" + encodeURIComponent(id) + ".html"; a.textContent = id;
      a.className = "rollout-link"; td.appendChild(a);
    } else {
      td.textContent = id;
      td.title = "no trace page here: containmentbench show " + id + " --run-dir RUN_DIR, or containmentbench report RUN_DIR --serve";
    }
    tr.appendChild(td);
    ["defense", "stage", "scenario", "seed", "outcome"].forEach(function (c) { cell(tr, val(r, c)); });
    C.slice(ix.status + 1, ix.page).forEach(function (c) {
      var v = val(r, c); cell(tr, v === null ? "N/A" : String(v), v === null ? "na" : "num");
    });
    if (val(r, "outcome") === "violation") { tr.className = "taint"; }
    body.appendChild(tr);
  });
}
Object.keys(F).forEach(function (k) {
  $("f-" + k).addEventListener(k === "scenario" ? "input" : "change", function (e) {
    F[k] = e.target.value; page = 0; writeHash(); render();
  });
});
Array.prototype.forEach.call(document.querySelectorAll("#ri-table th[data-col]"), function (th) {
  th.addEventListener("click", function () {
    var c = th.getAttribute("data-col");
    sortDir = sortCol === c ? -sortDir : 1; sortCol = c; render();
  });
});
$("ri-prev").addEventListener("click", function () { if (page > 0) { page -= 1; render(); } });
$("ri-next").addEventListener("click", function () { page += 1; render(); });
window.addEventListener("hashchange", function () { readHash(); page = 0; render(); });
readHash(); render();
}());
"""


def body(data: dict[str, Any]) -> str:
    """The page's controls and empty table (the script fills it)."""
    from html import escape

    sel = "".join(f'<label>{k.replace("_", " ")} <select id="f-{k}"><option value="">all'
                  "</option></select></label>" for k in ("defense", "stage", "outcome",
                                                         "status", "seed", *FACETS))
    heads = ["rollout_id", "defense", "stage", "scenario", "seed", "outcome", *METRICS]
    th = "".join(f'<th data-col="{escape(c)}" title="sort by {escape(c)}">'
                 f'{escape(data["labels"].get(c, c))}'
                 + (f' <a class="gl" href="glossary.html#g-{escape(c)}" title="what '
                    f'{escape(data["labels"][c])} means">?</a>' if c in data["labels"] else "")
                 + "</th>" for c in heads)
    return ('<p>Every rollout of the study. Filter, then sort by a column header; a '
            "rollout with a trace page links to it (every committed violation, error and "
            "case-study rollout has one; <code>containmentbench report RUN_DIR --serve</code> "
            "makes the others on demand; a contained rollout of every defense x carrier x goal "
            "has one too). Outcome: <b>violation</b> = a committed policy "
            "violation (eq. 5); <b>blocked</b> = the policy stopped a call and nothing "
            "violated; <b>error</b> = a provider error (never an outcome).</p>"
            f'<div class="filters">{sel}<label>scenario <input id="f-scenario" size="18" '
            'placeholder="part of an id"></label></div>'
            '<p><span id="ri-count"></span> · <span class="pager"><button id="ri-prev">'
            'previous</button><span id="ri-page"></span><button id="ri-next">next</button>'
            f'</span></p><div class="tbox"><table id="ri-table"><thead><tr>{th}</tr></thead>'
            '<tbody id="ri-body"></tbody></table></div>')
