"""The report of a several-model study's ``cross_model/`` folder (``cross-model`` verb, before
the folder's manifest is written): each model's headline side by side (its operating-point
figure copied in and its findings table, never pooled), then the comparison's sentences and
the table of paired deltas with their intervals.

A model's headline is shown only when its run is frozen and its ``tables/headline.json``
hash equals its manifest entry; otherwise the section says why. Everything the page shows
lives inside ``cross_model/report/`` (the figures are copies, the glossary its own page), so
it opens from ``file://`` with no request outside its folder. The only links that leave it
are meant to: each model's own report of the same study (its index, and a violation count's
rollouts), ``../../<model>/report/``.
"""

from __future__ import annotations

import json
from pathlib import Path

from containmentbench.analysis.writers import read
from containmentbench.canonical import sha256_file
from containmentbench.integrity import writer
from containmentbench.report import headline as HL
from containmentbench.report import html as H
from containmentbench.report import pages

FIGURE = "headline_operating_points.png"


def _model_headline(run: Path) -> tuple[dict | None, str]:
    """(headline.json, '') of a frozen run whose headline matches its manifest, else
    (None, why)."""
    from containmentbench.errors import BenchError
    from containmentbench.integrity import reading
    from containmentbench.integrity.keys import load_key

    head = run / "tables" / "headline.json"
    if not head.is_file():
        return None, "no tables/headline.json"
    try:  # the manifest checked as every reader checks it (its MAC with a key)
        man = reading.checked(run, load_key(run), require_manifest=True)
    except BenchError as exc:
        return None, exc.detail
    if man is None:
        return None, "the run is not frozen yet"
    files = man[0]["files"]
    if files.get("tables/headline.json") != sha256_file(head):
        return None, "tables/headline.json differs from the run's MANIFEST.json"
    return json.loads(head.read_text()), ""


def build_cross_report(out: Path, runs: list[Path]) -> Path:
    out = Path(out)
    doc = json.loads((out / "tables" / "headline.json").read_text())
    figures: dict[str, Path] = {}
    parts = [f'<p class="question"><b>{H.escape(doc["question"])}</b> '
             f'<span class="small">{H.escape(doc["method"])}.</span></p>',
             '<h2 id="models">Each model\'s headline</h2><div class="models">']
    for run in runs:
        slug = run.name
        mine, why = _model_headline(run)
        parts.append(f"<div><h3>{H.escape(slug)}</h3>")
        if mine is None:
            parts.append(f"<p>No headline shown: {H.escape(why)}.</p></div>")
            continue
        fig = run / "figures" / FIGURE
        if fig.is_file():
            figures[f"figures/{slug}.png"] = fig
            parts.append(f'<figure class="hl-fig"><img src="figures/{H.escape(slug)}.png" '
                         f'alt="operating points of {H.escape(slug)}"></figure>')
        parts.append('<div class="tbox">' + HL.findings_table(
            mine, root=f"../../{slug}/report/", table_id=f"findings-{slug}", glossary="")
            + f'</div><p class="small">{H.link(f"../../{slug}/report/index.html", "its report")}'
            "</p></div>")
    parts.append("</div>")
    parts.append('<h2 id="deltas">Paired deltas</h2><ul class="sentences">'
                 + "".join(f"<li>{H.escape(x)}</li>" for x in doc["sentences"]) + "</ul>")
    t = out / "tables" / "cross_model_by_defense.parquet"
    table = read(t)
    cap, df = table.caption, table.frame
    parts.append(f'<p class="hash">tables/{t.name} · sha256 {sha256_file(t)}</p>'
                 '<div class="tbox">' + H.table(df.columns, df.iter_rows(), caption=cap,
                                                table_id="table-cross_model_by_defense")
                 + "</div>")
    nav = [("#models", "Headlines"), ("#deltas", "Paired deltas"),
           *((f"../../{r.name}/report/index.html", f"{r.name} report") for r in runs)]
    page = H.page(f"Cross-model report: {doc['study']}", "".join(parts),
                  sim_note=doc["note"] if doc.get("simulated_agent") else None,
                  nav_links=nav)
    # a different earlier report is replaced only under --force (writer.forcing)
    with writer.building_dir(out / "report", "report", identical=_same) as b:
        b.put_text("index.html", page)
        b.put_text("glossary.html", H.page("Glossary: what each number means",
                                           pages.glossary(), nav_links=[("index.html",
                                                                         "Cross-model report")]))
        for rel, src in sorted(figures.items()):
            b.copy_in(src, rel)
    return out / "report" / "index.html"


def _same(new: Path, old: Path) -> bool:
    def files(d: Path) -> dict[str, bytes]:
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
                if p.is_file() and not p.name.startswith(".")}
    return files(new) == files(old)
