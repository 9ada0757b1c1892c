"""The report in a real browser (Debian's chromium, headless, driven by playwright).

Opens the report from ``file://``, clicks from a rule-attribution row through to a rollout
page, checks that the trace graph and a case-study pair render, fails on any console error,
failed request or broken image, and keeps screenshots under the study folder
(``<run dir>/screenshots/``).

Locally the test skips when chromium or playwright is absent; CI sets
``CB_REQUIRE_BROWSER=1`` so absence is a failure there. ``CB_BROWSER_STUDY`` points it at a
study built by the real pipeline (CI: the smoke study); otherwise it uses the test run dir.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CB_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


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


@pytest.fixture(scope="module")
def study(run_dir):
    env = os.environ.get("CB_BROWSER_STUDY")
    if not env:
        return run_dir
    root = Path(env).resolve()
    # a run directory, or a study folder holding one run directory per model
    found = [root] if (root / "report" / "index.html").exists() else \
        sorted(p.parents[1] for p in root.glob("*/report/index.html"))
    if not found:
        pytest.fail(f"CB_BROWSER_STUDY={env}: no report/index.html in it or one level below")
    return found[0]


def _watch(page, problems: list[str]) -> None:
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))


def _broken_images(page) -> list[str]:
    return page.eval_on_selector_all(
        "img", "els => els.filter(e => !e.complete || e.naturalWidth === 0).map(e => e.src)")


def test_report_in_chromium(browser, study):
    shots = study / "screenshots"
    shots.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    _watch(page, problems)
    # nothing may leave the machine: any non-file request is a failure
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
               else (problems.append(f"network request: {route.request.url}"), route.abort()))

    page.goto((study / "report" / "index.html").as_uri())
    assert page.title() == "Study report"
    assert page.locator("#table-rule_attribution tbody tr").count() > 0
    assert _broken_images(page) == []
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

    # every page of the drill-down opens without errors or missing assets
    page.goto((study / "report" / "drilldown.html").as_uri())
    page.locator("#drill a").first.click()
    page.wait_for_load_state()
    assert _broken_images(page) == []
    assert problems == []
