"""The static HTML report: links, trace pages, determinism, no network, refusal."""

from __future__ import annotations

import re
import shutil

import polars as pl
import pytest

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
            assert run_cli("show", rid, "--run-dir", run_dir) == 0
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
    assert pages["index.html"].count("<img ") == 5  # the headline's and Figs. 3-6
    assert (run_dir / "report" / "figures" / "fig04_operating_points.png").exists()
    assert "Simulated agent" in pages["index.html"]


def test_no_external_fetch(run_dir):
    """No URL leaves the machine; the one script of the report is the rollout index's own,
    inline (no src), and its data is a JSON block (never executed)."""
    for name, html in _pages(run_dir).items():
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert not re.match(r"(?i)(https?:)?//", url), (name, url)
        scripts = re.findall(r"<script([^>]*)>", html)
        if name == "rollouts.html":
            assert scripts == [' type="application/json" id="rollout-data"', ""]
            assert "fetch(" not in html and "XMLHttpRequest" not in html
        else:
            assert scripts == [], name


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
        assert not re.search(r"<[^>]+\sstyle=", html), name
        # an inline script runs only by its own hash (the rollout index's; JSON blocks are
        # data); every other page has no script-src at all
        code = re.findall(r"<script>(.*?)</script>", html, re.S)
        assert ("script-src" in policy) == bool(code), name
        if code:
            assert policy["script-src"] == [
                "'sha256-" + base64.b64encode(hashlib.sha256(c.encode()).digest()).decode()
                + "'" for c in code]
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
    # the manifest's copy still says the study is frozen: a missing manifest, refused
    assert run_cli("report", copy) == 2
    err = capsys.readouterr().err
    assert "MANIFEST.json is missing but the study is frozen (freeze 1" in err
    (copy / ".frozen-manifest.json").unlink()
    assert run_cli("report", copy) == 2
    assert "not frozen" in capsys.readouterr().err


def test_headline_is_the_first_screen(run_dir):
    """The index opens with the question, the operating-point figure, the findings table
    (one row per defense, every quantity with its interval) and the sentences; the tables
    follow in paper order."""
    import json

    index = _pages(run_dir)["index.html"]
    main = index.split("<main>")[1]
    assert main.index('id="headline"') < main.index('id="overview"') < \
        main.index('id="tables"')
    head = main.split('id="headline"')[1].split("</section>")[0]
    assert 'src="figures/headline_operating_points.png"' in head
    doc = json.loads((run_dir / "tables" / "headline.json").read_text())
    rows = head.split('<table id="findings"')[1].split("</table>")[0].split("<tr>")[2:]
    assert len(rows) == len({r["defense"] for r in doc["findings"]}) == 5
    for sentence in doc["sentences"]:
        assert H_escape(sentence) in head
    order = [m.group(1) for m in re.finditer(r'<h3 id="t-([a-z0-9_]+)"', main)]
    assert order.index("table03_stage_accounting") < order.index(
        "table09_security_positive_control") < order.index("table12_claim_critical") \
        < order.index("table25_paired_comparisons") < order.index("stage_means")


def H_escape(text):
    from html import escape
    return escape(text)


def test_every_violating_errored_and_case_rollout_has_a_page(run_dir):
    """Static trace pages: every committed violation, every provider error, every
    case-study rollout; the index reaches each violating one in two clicks (findings cell
    -> filtered rollout index -> page)."""
    pages = _pages(run_dir)
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    want = set(m.filter((pl.col("committed_harm") == 1) | (pl.col("status") == "error"))
               ["rollout_id"].to_list())
    cases = pl.read_parquet(run_dir / "tables" / "case_studies.parquet")
    want |= set(cases["rollout_a"].drop_nulls().to_list() + cases["rollout_b"].drop_nulls()
                .to_list())
    assert m.filter(pl.col("committed_harm") == 1).height > 0
    assert all(f"rollouts/{r}.html" in pages for r in want)
    violating = m.filter(pl.col("committed_harm") == 1)["defense"].unique().to_list()
    for d in violating:  # click 1: the findings cell of that defense
        assert f'href="rollouts.html#defense={d}&amp;outcome=violation"' in pages["index.html"]


def _index_rows(run_dir):
    import json

    html = _pages(run_dir)["rollouts.html"]
    block = html.split('<script type="application/json" id="rollout-data">')[1] \
        .split("</script>")[0]
    data = json.loads(block)
    cols = data["columns"]
    out = []
    for r in data["rows"]:
        row = dict(zip(cols, r, strict=True))
        for k, vals in data["dict"].items():
            row[k] = vals[row[k]]
        out.append(row)
    return out


def test_rollout_index_lists_every_rollout_with_its_values(run_dir):
    pages = _pages(run_dir)
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    rows = {r["rollout_id"]: r for r in _index_rows(run_dir)}
    assert set(rows) == set(m["rollout_id"].to_list())
    for r in m.iter_rows(named=True):
        x = rows[r["rollout_id"]]
        assert (x["defense"], x["stage"], x["scenario"], x["seed"]) == \
            (r["defense"], r["stage"], r["scenario_id"], r["seed"])
        assert x["committed_harm"] == r["committed_harm"]
        assert x["outcome"] == ("error" if r["status"] == "error" else "violation"
                                if r["committed_harm"] == 1 else "blocked"
                                if r["policy_block"] == 1 else "no violation")
        assert x["page"] == int(f"rollouts/{r['rollout_id']}.html" in pages)


def test_trace_page_shows_its_own_metric_values_and_whole_text(run_dir):
    pages = _pages(run_dir)
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    r = m.filter(pl.col("committed_harm") == 1).sort("rollout_id").row(0, named=True)
    html = pages[f"rollouts/{r['rollout_id']}.html"]
    table = html.split('id="rollout-metrics"')[1].split("</table>")[0]
    gl = '<a class="gl" href="../glossary.html#g-{}">{}</a>'
    assert re.search(r'title="committed_harm \(eq\. 5\)">'
                     + re.escape(gl.format("committed_harm", "Committed policy violation"))
                     + r'</td><td class="num">1</td>', table)
    spread = f"{r['blast_radius_norm']:.4f}"
    assert (f'title="blast_radius_norm (eq. 4)">{gl.format("blast_radius_norm", "Logged spread")}'
            f'</td><td class="num">{spread}') in table
    # a cut gist opens to the whole text, which is in the page
    assert "<details><summary>" in html and "<pre>text: " in html


def test_drilldown_cells_open_the_filtered_index(run_dir):
    drill = _pages(run_dir)["drilldown.html"]
    assert 'href="rollouts.html#defense=none&amp;stage=security"' in drill
    assert "drill/" not in drill


def test_drilldown_shows_the_headline_numbers_with_stage_n_and_interval(run_dir):
    """One name, one number (issue 35): a drill-down cell is the findings row of the same
    defense and quantity (its estimate, interval and n), its header names the stage, and
    no pooled false-positive rate poses under Table 11's name."""
    import json

    from containmentbench.analysis.headline import cell

    drill = _pages(run_dir)["drilldown.html"]
    doc = json.loads((run_dir / "tables" / "headline.json").read_text())
    r = next(x for x in doc["findings"]
             if x["defense"] == "none" and x["metric"] == "authorized_tainted_action_success")
    assert f"{cell(r)} n={r['n']}".replace("≤", "&le;") in drill or \
        f"{cell(r)} n={r['n']}" in drill
    assert "False-positive block rate" not in drill.split("<tbody>")[0]
    assert "<th>Authorized completion (active-tainted utility)</th>" in drill
    assert "<th>Committed policy violation (all stages)</th>" in drill
    assert "95% scenario-cluster interval" in drill


def test_serve_makes_any_rollout_page_on_demand(run_dir):
    """report --serve: a rollout without a static page is rendered from the traces; only
    the report folder is served, only on 127.0.0.1."""
    import threading
    import urllib.error
    import urllib.request

    from containmentbench.report.serve import make_server

    pages = _pages(run_dir)
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    plain = next(r for r in sorted(m["rollout_id"].to_list())
                 if f"rollouts/{r}.html" not in pages)
    server = make_server(run_dir, port=0)
    host, port = server.server_address
    assert host == "127.0.0.1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        def get(path):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}") as resp:
                return resp.status, resp.read().decode()

        status, html = get(f"rollouts/{plain}.html")
        assert status == 200 and plain in html and 'id="rollout-metrics"' in html
        assert not (run_dir / "report" / "rollouts" / f"{plain}.html").exists()
        assert get("index.html")[0] == 200
        for bad in ("../MANIFEST.json", "%2e%2e/MANIFEST.json", "rollouts/r-0.html",
                    "rollouts/"):
            with pytest.raises(urllib.error.HTTPError) as e:
                get(bad)
            assert e.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_headline_prints_only_a_verified_study(run_dir, tmp_path, capsys):
    """`containmentbench headline`: the frozen numbers and the report's path; a study that
    fails verify gets no headline, only a one-line error."""
    capsys.readouterr()
    assert run_cli("headline", run_dir) == 0
    out = capsys.readouterr().out
    assert out.startswith("Headline: study adhoc") and "| defense" in out
    assert f"report: {(run_dir / 'report' / 'index.html').resolve()}" in out
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    t = copy / "tables" / "table09_security_positive_control.csv"
    t.write_bytes(t.read_bytes() + b"\n")
    assert run_cli("headline", copy) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and "mismatch" in cap.err


def test_report_pages_in_two_processes_are_the_same_bytes(run_dir, tmp_path, monkeypatch):
    """``report --workers 2`` (a spawned process renders half of the trace pages) writes the
    same report as one process."""
    from containmentbench.report import build

    monkeypatch.setattr(build, "PARALLEL_PAGES", 1)  # the fixture study has few pages
    one = build.build_report(run_dir, tmp_path / "one", workers=1).parent
    two = build.build_report(run_dir, tmp_path / "two", workers=2).parent
    assert len(list((one / "rollouts").glob("*.html"))) > 2

    def tree(d):
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
                if p.is_file()}
    assert tree(one) == tree(two)
