"""Tables 18-19 (paper 000 Appendix B) and the study's target-path funnel table on small
frames whose values were worked out by hand."""

from __future__ import annotations

import polars as pl
import pytest

from containmentbench.analysis import diagnostic_tables, tables
from containmentbench.attacks.tables import table18, table19
from containmentbench.errors import BenchError

T, F_ = True, False


def _t18_frame() -> pl.DataFrame:
    rows = []
    def add(mode, ev, status, exact, goal, off, util):
        rows.append({"rollout_id": f"r{len(rows)}", "study": "adaptive_smoke",
                     "model": "sim:default", "backend": "sim", "defense": ev,
                     "status": status, "mode": mode, "optimized_for": "none",
                     "evaluated_defense": ev,
                     "fn_stage": None if status == "error" else 2,
                     "fn_exact_proposal": exact, "fn_goal_commit": goal,
                     "fn_offtarget_commit": off, "benign_success": util})
    # listed out of order: the table orders instance_eval first, then the defense order
    add("universal_eval", "tool_boundary", "ok", T, F_, F_, 1)
    add("universal_eval", "tool_boundary", "ok", F_, F_, F_, 1)
    for exact, goal, off, util in ((T, F_, T, 0), (T, T, F_, 1), (F_, F_, F_, 0)):
        add("universal_eval", "none", "ok", exact, goal, off, util)
    add("universal_eval", "none", "error", None, None, None, None)
    for exact, goal, off, util in ((T, T, F_, 1), (F_, F_, T, 0), (F_, F_, F_, 1),
                                   (F_, F_, F_, 1)):
        add("instance_eval", "none", "step_limit", exact, goal, off, util)
    return pl.DataFrame(rows)


def test_table18_by_hand():
    t = table18(_t18_frame())
    assert t.name == "table18_candidate_transfer"
    got = t.frame.to_dicts()
    assert [(r["mode"], r["evaluated_defense"], r["n"], r["errors"]) for r in got] == [
        ("instance_eval", "none", 4, 0), ("universal_eval", "none", 3, 1),
        ("universal_eval", "tool_boundary", 2, 0)]
    # instance_eval: 1/4 exact, 1/4 goal-matched, 1/4 off-target, utility 3/4
    assert [got[0][k] for k in ("exact_proposal", "goal_matched_commit", "offtarget_commit",
                                "utility")] == [0.25, 0.25, 0.25, 0.75]
    # universal_eval / none: the error row is not an outcome: 2/3, 1/3, 1/3, 1/3
    assert [got[1][k] for k in ("exact_proposal", "goal_matched_commit", "offtarget_commit",
                                "utility")] == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert [got[2][k] for k in ("exact_proposal", "goal_matched_commit", "offtarget_commit",
                                "utility")] == [0.5, 0.0, 0.0, 1.0]
    assert "Simulated agent (sim backend)" in t.caption and "benign_success" in t.caption


def test_table18_refuses_pooled_models_and_unattacked_rows():
    df = _t18_frame()
    with pytest.raises(BenchError, match="never pooled"):
        table18(df.with_columns(pl.when(pl.col("rollout_id") == "r0").then(pl.lit("m2"))
                                .otherwise(pl.col("model")).alias("model")))
    with pytest.raises(BenchError, match="pre-specified exact goal"):
        table18(df.with_columns(pl.when(pl.col("rollout_id") == "r1").then(None)
                                .otherwise(pl.col("fn_stage")).alias("fn_stage")))
    with pytest.raises(BenchError, match="no column 'mode'"):
        table18(df.drop("mode"))


def test_table19_by_hand():
    rows = []
    def add(stage, scope, domain, exact, goal):
        rows.append({"qual_stage": stage, "qual_scope": scope, "domain": domain,
                     "fn_exact_proposal": exact, "fn_goal_commit": goal,
                     "study": "adaptive_smoke", "backend": "sim"})
    held = ("family_heldout_check", "unseen task families")
    add(*held, "calendar_crm", T, T)
    add(*held, "email", F_, F_)
    add(*held, "document", T, F_)
    add("known_good_replay", "retained target actions", "email", T, T)
    add("known_good_replay", "retained target actions", "document", T, T)
    add("development_check", "target-preserving search", "email", F_, F_)
    t = table19(pl.DataFrame(rows))
    assert t.name == "table19_adaptive_qualification"
    assert t.frame.to_dicts() == [
        {"stage": "Known-good replay", "scope": "retained target actions", "n": 2,
         "exact_proposal": "2/2", "goal_matched_commit": "2/2",
         "domain_coverage": "documents, email", "errors": 0},
        {"stage": "Development check", "scope": "target-preserving search", "n": 1,
         "exact_proposal": "0/1", "goal_matched_commit": "0/1", "domain_coverage": "none",
         "errors": 0},
        {"stage": "Family-held-out check", "scope": "unseen task families", "n": 3,
         "exact_proposal": "2/3", "goal_matched_commit": "1/3",
         "domain_coverage": "calendar/CRM", "errors": 0}]
    assert "Simulated agent (sim backend)" in t.caption


def test_study_funnel_table_by_hand():
    base = {"study": "s", "model": "sim:default", "backend": "sim", "stage": "security",
            "cluster_id": "c1"}
    flags = ("fn_exposed", "fn_exact_proposal", "fn_policy_pass", "fn_goal_commit",
             "fn_offtarget_commit", "fn_partial_follow")
    rows = [
        # none: stage 5, stage 2 + off-target, stage 3; an error row is not counted; partial
        # follow beside the funnel: the goal commit and the off-target one
        {**base, "defense": "none", "status": "ok", "fn_stage": 5,
         **dict(zip(flags, (T, T, T, T, F_, T)))},
        {**base, "defense": "none", "status": "ok", "fn_stage": 2,
         **dict(zip(flags, (T, F_, F_, F_, T, T)))},
        {**base, "defense": "none", "status": "ok", "fn_stage": 3,
         **dict(zip(flags, (T, T, F_, F_, F_, F_)))},
        {**base, "defense": "none", "status": "error", "fn_stage": None,
         **dict.fromkeys(flags)},
        {**base, "defense": "tool_boundary", "status": "ok", "fn_stage": 3,
         **dict(zip(flags, (T, T, F_, F_, F_, F_)))},
        # a clean rollout: no exact goal (null), not in the table
        {**base, "stage": "clean", "defense": "none", "status": "ok", "fn_stage": None,
         **dict.fromkeys(flags)},
    ]
    df = pl.DataFrame(rows)
    t = diagnostic_tables.target_funnel(df, tables.Context(df))
    got = t.frame.to_dicts()
    assert [(r["stage"], r["defense"], r["n"], r["n_clusters"]) for r in got] == [
        ("Security", "none", 3, 1), ("Security", "tool_boundary", 1, 1)]
    assert [got[0][k] for k in ("exposed", "exact_proposal", "policy_pass", "goal_commit",
                                "offtarget_commit")] == [3, 2, 1, 1, 1]
    assert got[0]["exact_proposal_rate"] == pytest.approx(2 / 3)
    assert (got[0]["partial_follow"], got[0]["partial_follow_rate"]) == (2, pytest.approx(2 / 3))
    assert got[1]["partial_follow"] == 0
    assert (got[1]["exact_proposal"], got[1]["policy_pass"], got[1]["goal_commit_rate"]) == \
        (1, 0, 0.0)
    assert "Simulated agent" in t.caption
    assert diagnostic_tables.target_funnel(df.filter(pl.col("stage") == "clean"),
                                tables.Context(df)) is None
