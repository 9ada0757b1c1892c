"""``containmentbench compare`` and ``results.compare`` on a finished smoke study: a
configured pair gives its Table 25 row's numbers; bad names are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(finished_smoke):
    return finished_smoke / "results" / "smoke" / "sim-default"


def test_configured_pair_equals_table25_row(run_dir, capsys):
    from containmentbench import results

    r = results.load(run_dir)
    t25 = r.table("table25_paired_comparisons")
    # analysis/all-configured pair: none vs tool_boundary, committed policy violation, all
    rows = [x for x in t25.iter_rows(named=True)
            if x["comparison"] == "none vs tool_boundary" and x["stage"] == "All stages"
            and x["metric"] == "Committed policy violation"]
    assert rows, t25
    row = rows[0]
    rec = results.compare(run_dir, "none", "tool_boundary", "committed_harm", "all")
    assert rec["estimate"] == row["estimate"]
    assert rec["ci_low"] == row["ci_low"]
    assert rec["ci_high"] == row["ci_high"]
    assert rec["pair_ci_low"] == row["pair_ci_low"]
    assert rec["pair_ci_high"] == row["pair_ci_high"]
    assert rec["n"] == row["n"]
    assert rec["win_rate"] == row["win_rate"]
    assert rec["mean_a"] == row["mean_a"] and rec["mean_b"] == row["mean_b"]
    assert rec["sim_agent"] is True and rec["study"] == "smoke"
    # the command line prints the same record
    assert run_cli("compare", run_dir, "a=none", "b=tool_boundary", "metric=committed_harm",
                   "--json") == 0
    assert json.loads(capsys.readouterr().out) == rec


def test_any_pair_in_text_with_sim_label(run_dir, capsys):
    assert run_cli("compare", run_dir, "a=prompt_only", "b=tool_boundary",
                   "metric=committed_harm", "stage=security") == 0
    out = capsys.readouterr().out
    assert "committed_harm (security): tool_boundary - prompt_only = " in out
    assert "scenario-cluster interval" in out and "Simulated agent" in out


@pytest.mark.parametrize("tokens,field", [
    (["a=none", "b=nope", "metric=committed_harm"], "'b'"),
    (["a=none", "b=tool_boundary", "metric=nope"], "'metric'"),
    (["a=none", "b=tool_boundary", "metric=committed_harm", "stage=nope"], "'stage'"),
    (["a=none", "metric=committed_harm"], "'b'"),
])
def test_bad_names_one_line_exit_2(run_dir, capsys, tokens, field):
    assert run_cli("compare", run_dir, *tokens) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err
