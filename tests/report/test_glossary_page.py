"""The report's glossary page, generated from ``metrics/glossary.py`` and linked from every
table header naming a metric; exclusion counters after the metric columns (issue 35,
item 7)."""

from __future__ import annotations

import re

import pyarrow.parquet as pq

from containmentbench.metrics.glossary import TERMS, key_of
from containmentbench.report import html as H


def _read(run_dir, name):
    return (run_dir / "report" / name).read_text()


def test_glossary_page_has_every_metric_from_the_glossary(run_dir):
    page = _read(run_dir, "glossary.html")
    ids = re.findall(r'<dt id="g-([a-z0-9_]+)">([^<]+)</dt><dd>([^<]+)\.', page)
    assert [k for k, _, _ in ids] == list(TERMS)
    for k, display, definition in ids:
        assert display == TERMS[k].display
        assert definition == H.text(TERMS[k].definition)
    assert 'id="columns"' in page and "excluded_provider_error" in page
    for name in ("index.html", "rollouts.html", "drilldown.html", "cases.html"):
        assert '<a href="glossary.html">Glossary</a>' in _read(run_dir, name)


def test_every_metric_header_links_its_glossary_entry(run_dir):
    anchors = set(re.findall(r'id="(g-[a-z0-9_]+)"', _read(run_dir, "glossary.html")))
    pages = [p for p in (run_dir / "report").rglob("*.html") if p.name != "glossary.html"]
    checked = 0
    for p in pages:
        text = p.read_text()
        for head in re.findall(r"<thead><tr>(.*?)</tr></thead>", text):
            for th in re.findall(r"<th[^>]*>(.*?)</th>", head):
                plain = re.sub(r"<[^>]+>", "", th).split("?")[0].strip()
                key = key_of(plain) if plain else None
                if key is None or plain.startswith("sort by"):
                    continue
                m = re.search(r'href="(?:\.\./)?glossary\.html#(g-[a-z0-9_]+)"', th)
                assert m, (p.name, th)
                assert m.group(1) == f"g-{key}" and m.group(1) in anchors
                checked += 1
    assert checked > 20


def test_exclusion_counters_come_after_the_metric_columns(run_dir):
    index = _read(run_dir, "index.html")
    for stem in ("table09_security_positive_control", "table11_utility",
                 "table25_paired_comparisons", "stage_means"):
        cols = pq.read_schema(run_dir / "tables" / f"{stem}.parquet").names
        assert any(H.is_exclusion(c) for c in cols), stem
        head = index.split(f'id="table-{stem}"')[1].split("</thead>")[0]
        shown = [re.sub(r"<[^>]+>", "", th) for th in re.findall(r"<th[^>]*>(.*?)</th>", head)]
        flags = [H.is_exclusion(c) for c in shown]
        assert sum(flags) == sum(H.is_exclusion(c) for c in cols) > 0, stem
        assert flags == sorted(flags), (stem, shown)  # no counter before a metric column
    assert H.metric_first(["defense", "excluded_na", "mean", "fp_na", "n"]) == [
        "defense", "mean", "n", "excluded_na", "fp_na"]
