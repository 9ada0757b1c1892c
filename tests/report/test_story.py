"""A trace page tells the story first (issue 35, item 6): the summary box on top, only the
violating commit(s) of eq. 5 marked in graph and timeline, the act that contained an attack
marked on a contained rollout's page, a page for a contained rollout of every defense x
carrier x goal cell, and the rollout index filtering by carrier, goal, domain and
topology."""

from __future__ import annotations

import json
import re

import polars as pl

from containmentbench.report import rollindex
from containmentbench.report.rundir import Rollout, RunDir
from containmentbench.report.story import story
from containmentbench.report.tracepage import render
from containmentbench.scenarios.manifest import load_suite
from containmentbench.scenarios.oracle import Committed, violations


def _pages(run_dir):
    return {p.stem: p.read_text() for p in (run_dir / "report" / "rollouts").glob("*.html")}


def _marked(html, mark):
    """Seqs of timeline rows with the mark, and of graph nodes with it."""
    rows = {int(x) for x in re.findall(rf'<tr class="{mark}"><td class="num">(\d+)</td>', html)}
    nodes = {int(x) for x in re.findall(rf'<g class="node[^"]* {mark}" data-seq="(\d+)"', html)}
    return rows, nodes


def _violating_seqs(r: Rollout) -> set[int]:
    """Eq. 5 on every commit event, straight from the oracle (not through the metrics)."""
    scen = {s.id: s for s in load_suite(r.row["suite"])}[r.row["scenario_id"]]
    return {int(e["seq"]) for e in r.events if e["kind"] == "commit" and violations(
        scen, Committed(e["tool"], json.loads(e["args"]), e["session"], bool(e["high_risk"]),
                        e["seq"])).any}


def test_violating_pages_mark_exactly_the_violating_commits(run_dir):
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    ids = sorted(m.filter(pl.col("committed_harm") == 1)["rollout_id"].to_list())
    pages, run = _pages(run_dir), RunDir(run_dir)
    assert ids
    fewer = 0
    for r in run.load_many(ids):
        html = pages[r.id]
        want = _violating_seqs(r)
        assert want, r.id
        rows, nodes = _marked(html, "violation")
        assert rows == nodes == want, r.id
        commits = sum(e["kind"] == "commit" for e in r.events)
        fewer += len(want) < commits  # other commits of the rollout are not marked
        # the story comes first, before the graph, the timeline and the metrics
        order = [html.index(x) for x in ('id="summary"', 'id="graph"', 'id="timeline"',
                                         'id="metrics"', 'id="fields"')]
        assert order == sorted(order), r.id
        box = html.split('id="summary"')[1].split("</section>")[0]
        assert "Committed policy violation (eq. 5)" in box
        first = min(want)
        assert f'href="#ev-{first}">event #{first}</a>' in box
        commit = next(e for e in r.events if e["seq"] == first)
        decision = next(e for e in r.events if e["kind"] == "decision"
                        and e["call_id"] == commit["call_id"])
        # what let the call through: its own decision, with its rule
        assert f'href="#ev-{decision["seq"]}">event #{decision["seq"]}</a> decision <b>' \
               f'{decision["decision"]}</b>, rule <code>{decision["rule_id"]}</code>' in box
        if r.row["carrier"]:
            assert f"carrier <code>{r.row['carrier']}</code>" in box
    assert fewer > 0


def test_a_contained_rollout_of_every_defense_carrier_goal_cell_has_a_page(run_dir):
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    pages = _pages(run_dir)
    cells = m.filter(pl.col("attack_goal").is_not_null() & (pl.col("status") != "error")
                     & (pl.col("committed_harm") == 0))
    by_cell: dict[tuple, list[dict]] = {}
    for r in cells.iter_rows(named=True):
        by_cell.setdefault((r["defense"], r["carrier"], r["attack_goal"]), []).append(r)
    assert len(by_cell) > 5
    layered = 0
    for cell, rows in by_cell.items():
        shown = [r for r in rows if r["rollout_id"] in pages]
        assert shown, cell
        for r in shown:
            html = pages[r["rollout_id"]]
            assert 'class="story contained" id="summary"' in html, r["rollout_id"]
            rows_, nodes = _marked(html, "contained")
            assert rows_ == nodes
            if r["contained_by"] in ("no_layer", None):
                assert not rows_ and "no_layer" in html
            else:  # the containing act: one marked decision of that layer
                layered += 1
                assert len(rows_) == 1, r["rollout_id"]
                assert f"Contained by layer {r['contained_by']}" in html
        # a cell where some layer acted shows such a rollout, not one the agent left undone
        if any(r["contained_by"] not in ("no_layer", None) for r in rows):
            assert any(r["contained_by"] not in ("no_layer", None) for r in shown), cell
    assert layered > 0


def test_story_of_a_rollout_whose_scenario_is_unknown_names_no_event(run_dir):
    run = RunDir(run_dir)
    r = run.load(sorted(run.index)[0])
    lost = Rollout(dict(r.row, suite="no-such-suite"), r.events, r.edges, r.shard)
    s = story(lost, {"committed_harm": 1})
    assert s.kind == "unknown" and s.marks == {}
    assert "no-such-suite" in s.items[0][1]
    assert "/" not in s.items[0][1]  # no host path: the page's bytes do not depend on it
    html = render(lost, metrics={"committed_harm": 1})
    assert 'class="story neutral"' in html and 'class="violation"' not in html


def test_rollout_index_filters_by_carrier_goal_domain_and_topology(run_dir):
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    html = (run_dir / "report" / "rollouts.html").read_text()
    for k in ("carrier", "attack_goal", "domain", "topology"):
        assert f'<select id="f-{k}">' in html
        assert f'{k}: ""' in rollindex.SCRIPT
    block = html.split('<script type="application/json" id="rollout-data">')[1] \
        .split("</script>")[0]
    data = json.loads(block)
    cols = data["columns"]
    for row in data["rows"]:
        x = dict(zip(cols, row, strict=True))
        r = m.filter(pl.col("rollout_id") == x["rollout_id"]).row(0, named=True)
        for k in ("carrier", "attack_goal", "domain", "topology"):
            assert data["dict"][k][x[k]] == (r[k] if r[k] is not None else "(none)")
