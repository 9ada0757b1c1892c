"""Table 18's protocol (paper 000 §6.3, Appendix B): the searches each protocol runs, which
defenses replay which candidates, and the table's rows by search."""

from __future__ import annotations

import polars as pl
import pytest

from containmentbench.attacks import replay as R
from containmentbench.attacks.settings import searches, settings, variant
from containmentbench.attacks.tables import table18
from containmentbench.errors import BenchError


def test_variants_fix_the_defense_and_target_preservation(adaptive_data):
    data = adaptive_data()
    assert searches(data) == ("transfer", "target")  # the paper's protocol is the default
    t, g = variant(data, "transfer"), variant(data, "target")
    assert (t.optimized_for, t.target_preserving) == ("none", False)
    assert (g.optimized_for, g.target_preserving) == ("none", True)
    d = variant(data, "defense-tool_boundary")
    assert (d.optimized_for, d.target_preserving, d.policy_family) == (
        "tool_boundary", True, "boundary")
    with pytest.raises(BenchError, match="unknown search"):
        variant(data, "defense-rollback_v2")  # not in study.adaptive.defense_specific
    named = adaptive_data("study.adaptive.table18_protocol=target_preserving")
    assert searches(named) == ("target",)


@pytest.mark.parametrize("override,field", [
    ("study.adaptive.table18_protocol=first", "study.adaptive.table18_protocol"),
    ("study.adaptive.transfer_defenses=[none,nope]", "study.adaptive.transfer_defenses[1]"),
    ("study.adaptive.instance_defenses=[none,none]", "study.adaptive.instance_defenses"),
    ("study.adaptive.transfer_defenses=[]", "study.adaptive.transfer_defenses"),
])
def test_protocol_settings_are_checked(adaptive_data, override, field):
    with pytest.raises(BenchError) as e:
        settings(adaptive_data(override))
    assert e.value.field == field


def test_each_defense_runs_only_the_groups_that_evaluate_it(monkeypatch):
    import containmentbench.scenarios.manifest as M

    order = [("security", "a~x1"), ("security", "b~x1"), ("memory_recovery", "c~x1"),
             ("security", "d~tool_boundary.1")]
    monkeypatch.setattr(M, "suite_index", lambda suite: order)
    index = {"a~x1": {"evaluated_defenses": ["none", "tool_boundary", "taint_only_v1"]},
             "b~x1": {"evaluated_defenses": ["none"]},            # the instance audit
             "c~x1": {"evaluated_defenses": ["none", "tool_boundary", "taint_only_v1"]},
             "d~tool_boundary.1": {"evaluated_defenses": ["tool_boundary"]}}
    d = {"study": {"suite": "s", "shard_size": 1, "defenses": ["none", "tool_boundary",
                                                                "taint_only_v1"],
                   "seeds": [7], "stages": ["security", "memory_recovery"], "name": "x"},
         "model": {"name": "sim"}, "backend": {"name": "sim"}}
    monkeypatch.setattr("containmentbench.pipeline.plan.model_slug", lambda data: "m")
    got = {(s.defense, s.stage, s.index): s.scenario_ids for s in R.replay_shards(d, index)}
    assert got == {("none", "security", 0): ("a~x1",), ("none", "security", 1): ("b~x1",),
                   ("none", "memory_recovery", 0): ("c~x1",),
                   ("tool_boundary", "security", 0): ("a~x1",),
                   ("tool_boundary", "security", 1): ("d~tool_boundary.1",),
                   ("tool_boundary", "memory_recovery", 0): ("c~x1",),
                   ("taint_only_v1", "security", 0): ("a~x1",),
                   ("taint_only_v1", "memory_recovery", 0): ("c~x1",)}


def test_table18_rows_by_search():
    rows = []
    for search, mode, opt, ev in (("target", "universal_eval", "none", "none"),
                                  ("defense-taint_only_v1", "universal_eval", "taint_only_v1",
                                   "taint_only_v1"),
                                  ("transfer", "universal_eval", "none", "taint_only_v1"),
                                  ("transfer", "instance_eval", "none", "none")):
        rows.append({"rollout_id": f"r{len(rows)}", "study": "s", "model": "sim:default",
                     "backend": "sim", "defense": ev, "status": "ok", "search": search,
                     "mode": mode, "optimized_for": opt, "evaluated_defense": ev,
                     "fn_stage": 2, "fn_exact_proposal": False, "fn_goal_commit": False,
                     "fn_offtarget_commit": True, "benign_success": 1})
    t = table18(pl.DataFrame(rows))
    assert list(zip(t.frame["search"], t.frame["mode"], t.frame["paper_name"])) == [
        ("first search (not target-preserving)", "instance_eval", "none"),
        ("first search (not target-preserving)", "universal_eval",
         "cross-agent taint firewall"),
        ("target-preserving search", "universal_eval", "none"),
        ("defense-specific (taint_only_v1)", "universal_eval", "cross-agent taint firewall")]
    assert t.frame["offtarget_commit"].to_list() == [1.0] * 4
    assert "cross-agent taint firewall" in t.caption
