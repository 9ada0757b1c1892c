"""The report in a real browser (Debian's chromium, headless, driven by playwright).

Opens the report from ``file://`` at 1400x900 and checks that the first screen shows the
headline figure and the findings table; filters the rollout index to one defense and one
outcome and opens a violating rollout's page from it; clicks from a rule-attribution row
through to a rollout page; checks that the trace graph and a case-study pair render; opens
every other study's report it is given (AgentDojo, adaptive, the cross-model report of a
several-model study). Fails on any console error, failed request, broken image or request
outside the report's own folder, and keeps screenshots under each study folder
(``<run dir>/screenshots/``).

Locally the test skips when chromium or playwright is absent; CI sets
``CB_REQUIRE_BROWSER=1`` so absence is a failure there. ``CB_BROWSER_STUDY`` points it at a
study built by the real pipeline (CI: the smoke study); otherwise it uses the test run dir.
``CB_BROWSER_STUDIES`` (folders separated by ``:``) adds more studies to open: a run
directory, or a study folder (each of its run directories and its ``cross_model/``).
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CB_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREEN = {"width": 1400, "height": 900}


def _need(reason: str) -> None:
    if os.environ.get("CB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser test required (CB_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        _need(f"no chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


def _runs(root: Path) -> list[Path]:
    """A run directory, or the run directories of a study folder."""
    if (root / "report" / "index.html").exists():
        return [root]
    return sorted(p.parents[1] for p in root.glob("*/report/index.html")
                  if p.parents[1].name != "cross_model")


@pytest.fixture(scope="module")
def study(run_dir):
    env = os.environ.get("CB_BROWSER_STUDY")
    if not env:
        return run_dir
    found = _runs(Path(env).resolve())
    if not found:
        pytest.fail(f"CB_BROWSER_STUDY={env}: no report/index.html in it or one level below")
    return found[0]


def _open(browser, report: Path, problems: list[str]):
    """A page that fails on console errors, failed requests and any request outside
    ``report`` (the report folder): nothing may leave it, let alone the machine."""
    page = browser.new_page(viewport=SCREEN)
    inside = report.resolve().as_uri() + "/"
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))

    def route(r):
        if r.request.url.startswith(inside):
            return r.continue_()
        problems.append(f"request outside the report folder: {r.request.url}")
        return r.abort()
    page.route("**/*", route)
    return page


def _broken_images(page) -> list[str]:
    return page.eval_on_selector_all(
        "img", "els => els.filter(e => !e.complete || e.naturalWidth === 0).map(e => e.src)")


def _inside_first_screen(page, selector: str) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    assert box["y"] >= 0 and box["y"] + box["height"] <= SCREEN["height"], (selector, box)
    assert box["x"] >= 0 and box["x"] + box["width"] <= SCREEN["width"], (selector, box)


def _headline_first(page, run: Path, shots: Path, name: str) -> None:
    page.goto((run / "report" / "index.html").as_uri())
    assert page.title().startswith("Study report")
    assert _broken_images(page) == []
    if (run / "tables" / "headline.json").exists():
        _inside_first_screen(page, "#headline figure img")
        _inside_first_screen(page, "table#findings")
        img = page.locator("#headline figure img").bounding_box()
        assert img["width"] > 600 and img["height"] > 200
    page.screenshot(path=str(shots / f"{name}-first-screen.png"))


def test_report_in_chromium(browser, study):
    shots = study / "screenshots"
    shots.mkdir(exist_ok=True)
    problems: list[str] = []
    page = _open(browser, study / "report", problems)

    _headline_first(page, study, shots, "report-index")
    assert page.locator("#table-rule_attribution tbody tr").count() > 0
    page.screenshot(path=str(shots / "report-index.png"))

    # from a table row to its rollout page
    link = page.locator("#table-rule_attribution tbody tr").first.locator("a.rollout-link").first
    rid = link.inner_text()
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"rollouts/{rid}.html")
    graph = page.locator("svg.trace-graph")
    assert graph.is_visible()
    box = graph.bounding_box()
    assert box and box["width"] > 200 and box["height"] > 100
    assert page.locator("svg.trace-graph g.node").count() > 3
    assert page.locator("#timeline-table tbody tr").count() > 3
    page.locator("#graph").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "trace-page.png"), full_page=True)

    # a case-study pair renders side by side
    page.goto((study / "report" / "cases.html").as_uri())
    pair = page.locator(".pair").first
    assert pair.is_visible()
    sides = pair.locator(".side")
    assert sides.count() == 2
    b0, b1 = sides.nth(0).bounding_box(), sides.nth(1).bounding_box()
    assert b0 and b1 and b1["x"] > b0["x"] + 100  # side by side, not stacked
    pair.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "case-study.png"))

    # the drill-down opens the rollout index filtered to one cell
    page.goto((study / "report" / "drilldown.html").as_uri())
    page.locator("#drill tbody a").first.click()
    page.wait_for_load_state()
    assert page.locator("#ri-body tr").count() > 0
    assert _broken_images(page) == []
    assert problems == []


def test_two_clicks_to_a_violating_rollout(browser, study):
    """First screen -> the violation count of a defense (the index filtered to its
    violating rollouts) -> a violating rollout's page; then the index filtered by hand to
    one defense and one outcome."""
    shots = study / "screenshots"
    shots.mkdir(exist_ok=True)
    problems: list[str] = []
    page = _open(browser, study / "report", problems)
    page.goto((study / "report" / "index.html").as_uri())
    cell = page.locator("table#findings tbody a").first  # click 1
    assert cell.is_visible()
    cell.click()
    page.wait_for_load_state()
    assert "outcome=violation" in page.url
    rows = page.locator("#ri-body tr")
    assert rows.count() > 0
    assert set(page.locator("#ri-body tr td:nth-child(6)").all_inner_texts()) == {"violation"}
    page.screenshot(path=str(shots / "rollout-index-violations.png"))
    first = rows.first.locator("a.rollout-link")  # click 2
    rid = first.inner_text()
    first.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"rollouts/{rid}.html")
    metrics = page.locator("#rollout-metrics")
    assert metrics.is_visible()
    assert "Committed policy violation" in metrics.inner_text()
    details = page.locator("#timeline-table details").first
    details.locator("summary").click()  # long text opens
    assert details.locator("pre").is_visible()
    page.screenshot(path=str(shots / "violating-rollout.png"))

    # by hand: one defense, one outcome, sorted by logged spread
    page.goto((study / "report" / "rollouts.html").as_uri())
    total = page.locator("#ri-count").inner_text()
    defense = page.locator("#f-defense option").nth(1).get_attribute("value")
    page.select_option("#f-defense", defense)
    page.select_option("#f-outcome", "no violation")
    shown = page.locator("#ri-count").inner_text()
    assert shown != total and "#defense=" in page.url
    assert set(page.locator("#ri-body tr td:nth-child(2)").all_inner_texts()) == {defense}
    assert set(page.locator("#ri-body tr td:nth-child(6)").all_inner_texts()) == {
        "no violation"}
    page.locator("#ri-table th[data-col=blast_radius_norm]").click()
    spreads = [float(x) for x in page.locator("#ri-body tr td:nth-child(10)").all_inner_texts()
               if x != "N/A"]
    assert spreads == sorted(spreads)
    assert problems == []


def _others() -> list[Path]:
    env = os.environ.get("CB_BROWSER_STUDIES", "")
    return [Path(x).resolve() for x in env.split(":") if x]


@pytest.mark.parametrize("root", _others(), ids=lambda p: p.name)
def test_other_studies_reports(browser, root):
    """AgentDojo, adaptive and several-model studies: each run's first screen shows its
    headline; a study with a cross_model/ report shows each model's findings side by side."""
    runs = _runs(root)
    cross = root / "cross_model" / "report" / "index.html"
    assert runs or cross.exists(), root
    shots = root / "screenshots"
    shots.mkdir(exist_ok=True)
    for run in runs:
        problems: list[str] = []
        page = _open(browser, run / "report", problems)
        _headline_first(page, run, shots, f"{run.name}-index")
        page.goto((run / "report" / "rollouts.html").as_uri())
        assert page.locator("#ri-body tr").count() > 0
        assert problems == [], (run, problems)
    if cross.exists():
        problems = []
        page = _open(browser, cross.parent, problems)
        page.goto(cross.as_uri())
        assert page.title().startswith("Cross-model report")
        assert page.locator("table.findings").count() == len(runs) >= 2
        assert page.locator("#table-cross_model_by_defense tbody tr").count() > 0
        assert _broken_images(page) == []
        page.screenshot(path=str(shots / "cross-model-first-screen.png"))
        assert problems == []


#: what a page's links are, resolved by the browser (fragments dropped)
_LINKS_JS = """() => Array.from(document.querySelectorAll('a[href], img[src]'))
  .map(e => new URL(e.getAttribute('href') || e.getAttribute('src'), document.baseURI)
  .href.split('#')[0])"""


def _click_every_link(page, start: str, inside: str, problems: list[str]) -> dict[str, int]:
    """Open ``start`` and, breadth first, every page and file its links lead to (each URL
    once). An HTML page is opened in the browser (console errors, failed requests and
    requests outside ``inside`` are ``problems``; none may be wider than the window);
    any other file (CSV, Parquet, PNG) is fetched (served) or looked up on disk
    (``file://``), as a click would download it. Returns {url kind: count}."""
    from urllib.parse import unquote, urlsplit

    seen, queue, counts = {start}, [start], {"html": 0, "other": 0}
    while queue:
        url = queue.pop(0)
        assert url.startswith(inside), url
        if not url.endswith(".html"):
            if url.startswith("file:"):
                assert Path(unquote(urlsplit(url).path)).is_file(), url
            else:
                resp = page.request.get(url)
                assert resp.status == 200, (url, resp.status)
            counts["other"] += 1
            continue
        resp = page.goto(url)
        assert resp is None or resp.status == 200, (url, resp and resp.status)
        counts["html"] += 1
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], (url, width)  # no page wider than the window
        assert _broken_images(page) == [], url
        for link in page.evaluate(_LINKS_JS):
            if link not in seen:
                seen.add(link)
                queue.append(link)
    assert problems == []
    return counts


def test_every_link_opens_from_file(browser, study):
    """``file://``: every link of every page reachable from the index opens a file inside
    the report folder."""
    problems: list[str] = []
    report = study / "report"
    page = _open(browser, report, problems)
    counts = _click_every_link(page, (report / "index.html").as_uri(),
                               report.resolve().as_uri() + "/", problems)
    assert counts["html"] > 10 and counts["other"] > 20


def test_every_link_opens_from_an_out_folder(browser, study, tmp_path):
    """``report --out`` elsewhere: the same walk from ``file://`` in a folder far from the
    study, every link a file inside that folder."""
    from containmentbench.report.build import build_report

    report = build_report(study, tmp_path / "elsewhere" / "rep").parent
    problems: list[str] = []
    page = _open(browser, report, problems)
    counts = _click_every_link(page, (report / "index.html").as_uri(),
                               report.resolve().as_uri() + "/", problems)
    assert counts["html"] > 10 and counts["other"] > 20


@pytest.mark.slow
def test_every_link_opens_in_the_snakemake_archive(browser, finished_smoke, tmp_path):
    """``snakemake --report out.zip``: the study report unpacked from the archive, the same
    walk from ``file://``."""
    from tests.report.test_links import archived_report

    report = archived_report(finished_smoke, tmp_path)
    problems: list[str] = []
    page = _open(browser, report, problems)
    counts = _click_every_link(page, (report / "index.html").as_uri(),
                               report.resolve().as_uri() + "/", problems)
    assert counts["html"] > 10 and counts["other"] > 20


def test_every_link_opens_when_served(browser, study):
    """``report --serve``: the same walk over HTTP, every answer 200."""
    import threading

    from containmentbench.report.serve import make_server

    server = make_server(study, port=0, log=io.StringIO())  # one line per request: not here
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        problems: list[str] = []
        page = browser.new_page(viewport=SCREEN)
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base)
                   else (problems.append(f"outside: {r.request.url}"), r.abort()))
        counts = _click_every_link(page, base + "index.html", base, problems)
        assert counts["html"] > 10 and counts["other"] > 20
    finally:
        server.shutdown()
        server.server_close()


def test_trace_pages_tell_the_story_on_the_first_screen(browser, study):
    """A violating and a contained rollout's page: the summary box inside the first
    1400x900 screen, the violating commit (or containing act) ringed in the graph."""
    import polars as pl

    shots = study / "screenshots"
    shots.mkdir(exist_ok=True)
    m = pl.read_parquet(study / "metrics" / "rollout_metrics.parquet")
    pages = {p.stem for p in (study / "report" / "rollouts").glob("*.html")}
    violating = sorted(set(m.filter(pl.col("committed_harm") == 1)["rollout_id"]) & pages)
    contained = sorted(set(m.filter(pl.col("contained_by").is_not_null()
                                    & ~pl.col("contained_by").is_in(["no_layer",
                                                                     "not_contained"]))
                           ["rollout_id"]) & pages)
    assert violating and contained
    problems: list[str] = []
    page = _open(browser, study / "report", problems)
    for name, rid, mark in (("violating", violating[0], "violation"),
                            ("contained", contained[0], "contained")):
        page.goto((study / "report" / "rollouts" / f"{rid}.html").as_uri())
        _inside_first_screen(page, "#summary")
        assert page.locator(f"svg.trace-graph g.{mark}").count() >= 1
        assert page.locator(f"#timeline-table tr.{mark}").count() >= 1
        page.screenshot(path=str(shots / f"trace-{name}-first-screen.png"))
    # the index filters by carrier: only that carrier's rows remain
    page.goto((study / "report" / "rollouts.html").as_uri())
    carrier = page.locator("#f-carrier option").nth(1).get_attribute("value")
    page.select_option("#f-carrier", carrier)
    assert "carrier=" in page.url and page.locator("#ri-body tr").count() > 0
    assert problems == []
