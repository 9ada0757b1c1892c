"""Table 20 (paper 000 Appendix C) from hand-built qualification records and labels: the
staged rows, clusters as (user task, injection task) pairs, the frozen-task rule, and the
study settings that shape them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agentdojo")

from containmentbench.adapters.agentdojo import report as REP
from containmentbench.adapters.agentdojo.qualify import eligible_from, frozen_tasks
from containmentbench.errors import BenchError


def _lab(user, inj, defense="none", stage="security", security=False, status="ok",
         parity=True, applicable=True, linkage=True):
    return {"suite": "workspace", "user_task": user, "injection_task": inj, "stage": stage,
            "defense": defense, "status": status, "adapter_security": security,
            "parity": parity, "parity_applicable": applicable, "linkage_complete": linkage}


def test_frozen_tasks_are_the_first_eligible_and_the_gate_reads_the_eligible():
    assert frozen_tasks(["u1", "u3", "u5"], 2) == ["u1", "u3"]
    assert frozen_tasks(["u1", "u3"], 0) == ["u1", "u3"]
    rec = {"suite": "s", "eligible": ["u1", "u3", "u5"], "frozen": ["u1", "u3"]}
    assert eligible_from(rec, "s", 3) == ["u1", "u3"]
    with pytest.raises(BenchError, match="only 3 eligible"):
        eligible_from(rec, "s", 4)
    assert eligible_from({"suite": "s", "eligible": ["u1"]}, "s", 1) == ["u1"]  # older record


def test_clusters_are_pairs_positive_on_a_no_defense_committed_violation():
    rows = [_lab("u1", "i0", security=True), _lab("u1", "i0"),        # one pair, positive
            _lab("u1", "i1"), _lab("u2", "i0", status="error", security=True),  # error: no
            _lab("u2", "i1", defense="tool_boundary", security=True),   # not no-defense
            _lab("u3", "i0", security=True), _lab("u3", None, stage="clean")]
    got = REP._attacked(rows, selected={"u1", "u2"})
    assert got == {"clusters": 4, "positive_clusters": 2, "selected_clusters": 3,
                   "selected_positive_clusters": 1}


def test_table20_rows(tmp_path, monkeypatch):
    q = {"suite": "workspace", "candidates": ["u1", "u2", "u3"], "eligible": ["u1", "u3"],
         "frozen": ["u1"], "rows": 9, "parity_rows": 9, "linkage_rows": 8, "error_rows": 0,
         "initial": {"candidates": ["u1", "u2"], "eligible": ["u1"], "rows": 6,
                     "parity_rows": 6, "linkage_rows": 5}}
    (tmp_path / "qualification" / "screen" / "workspace").mkdir(parents=True)
    (tmp_path / "qualification" / "workspace.json").write_text(json.dumps(q))
    (tmp_path / "qualification" / "screen" / "workspace" / "screen.json").write_text("{}")
    matrix = [_lab("u1", "i0", security=True), _lab("u1", "i1"),
              _lab("u1", "i0", defense="intent_ledger_v2", applicable=False, parity=None),
              _lab("u1", None, stage="clean", linkage=False)]
    screen = [_lab("u1", "i0", security=True), _lab("u2", "i0", security=True),
              _lab("u3", "i1", parity=False)]

    class _T:
        def __init__(self, rows):
            self.rows = rows

        def to_pylist(self):
            return self.rows

    monkeypatch.setattr(REP, "read_shards", lambda root, name: _T(
        screen if "screen" in str(root) else matrix))
    f = REP.table20_frame(tmp_path)
    assert f["stage"].to_list() == list(REP.STAGES20)
    init, rev, mat, scr = f.to_dicts()
    assert (init["n"], init["signal"], init["linkage_rows"]) == (6, "1/2 tasks eligible", 5)
    assert rev["signal"] == "2/3 tasks eligible; 1 frozen" and rev["tasks_frozen"] == 1
    assert (mat["n"], mat["signal"]) == (4, "No-defense positives 1/2 clusters")
    assert (mat["parity_rows"], mat["parity_applicable"], mat["linkage_rows"]) == (3, 3, 3)
    assert scr["signal"] == "Positives 2/3; selected eligible positives 1/1"
    assert (scr["parity_rows"], scr["parity_applicable"]) == (2, 3)


@pytest.mark.parametrize("override,field", [
    ("study.adapter.initial_pool=30", "study.adapter.initial_pool"),
    ("study.adapter.freeze=4", "study.adapter.freeze"),
    ("study.adapter.screen_seeds=[1,1]", "study.adapter.screen_seeds"),
])
def test_workspace_study_settings_are_checked(override, field):
    from containmentbench.adapters.study import adapter_config
    from containmentbench.config.compose import load_study

    data = load_study(["study=agentdojo_workspace"])
    a = adapter_config(data)
    assert (a["max_user_tasks"], a["initial_pool"], a["freeze"], len(a["screen_seeds"])) == (
        21, 12, 8, 5)
    with pytest.raises(BenchError) as e:
        adapter_config(load_study(["study=agentdojo_workspace", override]))
    assert e.value.field == field
