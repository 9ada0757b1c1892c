"""The static HTML report: links, trace pages, determinism, no network, refusal."""

from __future__ import annotations

import re
import shutil

import polars as pl

from containmentbench.report.build import attribution_examples, build_report, linked_rollouts
from tests.conftest import run_cli


def _pages(run_dir):
    return {p.relative_to(run_dir / "report").as_posix(): p.read_text()
            for p in (run_dir / "report").rglob("*.html")}


def test_every_attribution_row_links_an_example_that_show_renders(run_dir, capsys):
    pages = _pages(run_dir)
    index = pages["index.html"]
    table = index.split('id="table-rule_attribution"')[1].split("</table>")[0]
    rows = table.split("<tbody>")[1].split("</tr>")[:-1]
    attr = pl.read_parquet(run_dir / "tables" / "rule_attribution.parquet")
    assert len(rows) == attr.height > 0
    for row in rows:
        ids = re.findall(r"rollouts/(r-[0-9a-f]+)\.html", row)
        assert ids, row
        for rid in ids:
            assert f"rollouts/{rid}.html" in pages
            assert run_cli("show", rid, "--study", run_dir) == 0
    capsys.readouterr()


def test_attribution_examples_carry_the_row_rule(run_dir):
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    by_id = {r["rollout_id"]: r for r in m.iter_rows(named=True)}
    attr = pl.read_parquet(run_dir / "tables" / "rule_attribution.parquet")
    for r in attr.iter_rows(named=True):
        ex = attribution_examples(m, r, 50)
        assert len(ex) == min(r["rows"], 50)  # the same pairs the table counts
        for rid in ex:
            rules = by_id[rid]["stop_rule_ids"]
            assert by_id[rid]["defense"] == r["defense"]
            assert (not rules) if r["rule_id"] == "(no stopping rule)" else r["rule_id"] in rules


def test_trace_pages_have_graph_timeline_and_cim_view(run_dir):
    pages = _pages(run_dir)
    linked = linked_rollouts(pages.values())
    assert linked and all(f"rollouts/{rid}.html" in pages for rid in linked)
    tainted = 0
    for rid in linked:
        html = pages[f"rollouts/{rid}.html"]
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="trace-graph"' in html
        assert 'id="timeline-table"' in html and 'id="cim"' in html
        tainted += 'class="node in-closure"' in html
    assert tainted > 0


def test_cases_page_and_tables_present(run_dir):
    pages = _pages(run_dir)
    # smoke holds scenarios of three of Table 21's scenario classes (report/cases.py)
    assert pages["cases.html"].count('class="pair"') >= 2
    for stem in ("case_studies", "table28_integrity_audit", "stage_means", "fig03_source"):
        assert f'id="table-{stem}"' in pages["index.html"]
    assert pages["index.html"].count("<img ") == 4
    assert (run_dir / "report" / "figures" / "fig04_operating_points.png").exists()
    assert "Simulated agent" in pages["index.html"]


def test_no_external_fetch(run_dir):
    for name, html in _pages(run_dir).items():
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert not re.match(r"(?i)(https?:)?//", url), (name, url)
        assert "<script" not in html


_CSP = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">')


def test_every_page_carries_a_csp_that_allows_only_what_it_uses(run_dir):
    """default-src 'none'; the page's one stylesheet by its hash; the report's own images
    only on a page that shows some; nothing external, no script, no inline style attribute."""
    import base64
    import hashlib

    pages = _pages(run_dir)
    assert len(pages) > 5
    with_images = 0
    for name, html in pages.items():
        head = html.split("</head>")[0]
        m = _CSP.search(head)
        assert m and head.index(m.group(0)) < head.index("<style>"), name
        policy = {d.split()[0]: d.split()[1:] for d in m.group(1).split("; ")}
        assert policy["default-src"] == ["'none'"], name
        assert policy["base-uri"] == policy["form-action"] == ["'none'"]
        for sources in policy.values():
            for src in sources:  # no host, no scheme, no wildcard, no 'unsafe-*'
                assert src in ("'none'", "'self'") or re.fullmatch(
                    r"'sha256-[A-Za-z0-9+/]+={0,2}'", src), (name, src)
        styles = re.findall(r"<style>(.*?)</style>", html, re.S)
        digest = base64.b64encode(hashlib.sha256(styles[0].encode()).digest()).decode()
        assert len(styles) == 1 and policy["style-src"] == [f"'sha256-{digest}'"], name
        assert not re.search(r"<[^>]+\sstyle=", html) and "<script" not in html, name
        images = re.findall(r'<img [^>]*src="([^"]+)"', html)
        assert ("img-src" in policy) == bool(images), name
        if images:
            with_images += 1
            assert policy["img-src"] == ["'self'"]
            assert not any(re.match(r"(?i)[a-z][a-z0-9+.-]*:|/", u) for u in images)
    assert with_images == 1  # the index's figures


def test_report_is_hashed_and_rebuilds_byte_identical(run_dir, tmp_path):
    import json
    files = json.loads((run_dir / "MANIFEST.json").read_text())["files"]
    assert "report/index.html" in files
    again = build_report(run_dir, tmp_path / "report")
    assert again == tmp_path / "report" / "index.html"
    for p in (run_dir / "report").rglob("*"):
        if p.is_file():
            assert (tmp_path / "report" / p.relative_to(run_dir / "report")).read_bytes() \
                == p.read_bytes(), p


def test_report_refuses_a_study_that_fails_verify(run_dir, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    t = copy / "tables" / "table11_utility.csv"
    t.write_bytes(t.read_bytes() + b"\n")
    before = (copy / "report" / "index.html").read_bytes()
    capsys.readouterr()
    assert run_cli("report", copy) == 2
    err = capsys.readouterr().err
    assert "fails verify" in err and err.count("\n") == 1
    assert (copy / "report" / "index.html").read_bytes() == before


def test_report_of_unfrozen_study_is_refused(run_dir, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "MANIFEST.json").unlink()
    assert run_cli("report", copy) == 2
    assert "not frozen" in capsys.readouterr().err
