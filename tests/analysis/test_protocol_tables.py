"""Tables defined as paper 000 defines them (issue "protocol fidelity"), on metrics frames
worked by hand: Table 11's FP rates per rollout over the active-tainted stage (Table 5),
Table 22's per-rollout means (Table 5) with the pooled rates beside, per-cell exclusions (errors, context overflows, N/A), and the
denominator and subset rules of Tables 14 and 24 stated in their captions."""

from __future__ import annotations

import polars as pl
import pytest

from containmentbench.analysis import diagnostic_tables as D
from containmentbench.analysis import exclusions as X
from containmentbench.analysis import tables as T
from containmentbench.analysis.paired import sensitivity, stage_contribution, zero_events
from containmentbench.metrics.schema import METRICS

BASE = {"study": "t", "suite": "t", "model": "sim:default", "backend": "sim",
        "decoding": "{}", "tool_mode": "prompt", "status": "ok", "seed": 1, "cluster_id": "c",
        "n_model_calls": 0, "n_model_actions": 0, "n_valid_proposals": 0,
        "n_parse_failures": 0, "n_invalid_tool": 0, "n_truncated": 0, "rule_ids": [],
        "stop_rule_ids": []}


def frame(rows):
    """A metrics frame with every column of the schema (null unless given)."""
    import pyarrow as pa
    schema = pa.schema([f.with_nullable(True) for f in METRICS])
    cols = {f.name: [{**BASE, **r}.get(f.name) for r in rows] for f in METRICS}
    return pl.from_arrow(pa.Table.from_pydict(cols, schema=schema))


def _fp_row(sid, d, opp, blocked, confirmed, stage="active_tainted", **kw):
    return {"scenario_id": sid, "stage": stage, "defense": d, "authorized_opportunities": opp,
            "fp_block_count": blocked, "fp_confirm_count": confirmed,
            "false_positive_block_rate": blocked / opp if opp else None,
            "false_positive_confirm_rate": confirmed / opp if opp else None,
            "authorized_tainted_action_success": 0 if stage == "active_tainted" else None,
            "clean_benign_completion": 1 if stage == "clean" else None, "exposed": 1, **kw}


def test_table11_fp_rates_are_per_rollout_means_over_the_active_stage():
    df = frame([
        _fp_row("a1", "v1", 2, 1, 0),    # 1/2 blocked
        _fp_row("a2", "v1", 1, 1, 0),    # 1/1 blocked
        _fp_row("a3", "v1", 0, 0, 0),    # no opportunity: N/A, left out
        _fp_row("a4", "v1", 4, 0, 1),    # 0/4 blocked, 1/4 confirmed
        _fp_row("c1", "v1", 4, 0, 0, stage="clean"),  # clean stage: not in Table 11's FP
        {**_fp_row("a5", "v1", 3, 3, 0), "status": "error", "error_kind": "provider_error"},
        {**_fp_row("a6", "v1", 3, 3, 0), "status": "error", "error_kind": "context_overflow"},
    ])
    row = T.table11(df, T.Context(df)).frame.row(0, named=True)
    assert row["active_n"] == 4 and row["fp_n"] == 3 and row["fp_na"] == 1
    assert row["fp_block"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)      # 0.5
    assert row["fp_confirm"] == pytest.approx((0 + 0 + 0.25) / 3)       # 0.0833
    assert row["fp_block_pooled"] == pytest.approx(2 / 7)
    assert row["fp_confirm_pooled"] == pytest.approx(1 / 7)
    assert (row["active_excluded_provider_error"],
            row["active_excluded_context_overflow"]) == (1, 1)
    assert row["clean_n"] == 1 and row["clean_completion"] == 1.0
    # the old definition pooled over active + clean: 2/11 -- a different number
    assert row["fp_block_pooled"] != pytest.approx(2 / 11)


def test_table22_reports_per_rollout_means_with_the_pooled_rates_beside():
    """Table 5: "reported means average the per-rollout value"; the pooling over model
    actions is a labelled extra column (issue 35: one name, one number)."""
    df = frame([
        {"scenario_id": "s1", "stage": "security", "defense": "none", "n_model_calls": 10,
         "n_model_actions": 10, "n_valid_proposals": 8, "n_parse_failures": 2,
         "n_truncated": 1, "parse_failure_rate": 0.2, "valid_tool_proposal_rate": 0.8,
         "invalid_tool_rate": 0.0, "truncated_rate": 0.1,
         "committed_harm": 1, "harm_attempt": 1, "benign_success": 0, "exposed": 1},
        {"scenario_id": "s2", "stage": "security", "defense": "none", "n_model_calls": 2,
         "n_model_actions": 2, "n_valid_proposals": 0, "n_parse_failures": 2,
         "n_invalid_tool": 0, "parse_failure_rate": 1.0, "valid_tool_proposal_rate": 0.0,
         "invalid_tool_rate": 0.0, "truncated_rate": 0.0,
         "committed_harm": 0, "harm_attempt": 0, "benign_success": 1, "exposed": 1},
        {"scenario_id": "s4", "stage": "security", "defense": "none", "committed_harm": 0,
         "harm_attempt": 0, "benign_success": 1, "exposed": 0},  # no model action: N/A
        {"scenario_id": "s3", "stage": "security", "defense": "taint_only_v1",
         "n_model_calls": 4, "n_model_actions": 4, "n_valid_proposals": 3,
         "n_invalid_tool": 1, "parse_failure_rate": 0.0, "valid_tool_proposal_rate": 0.75,
         "invalid_tool_rate": 0.25, "truncated_rate": 0.0, "committed_harm": 0, "exposed": 1},
    ])
    t = D.table22(df, T.Context(df))
    none = t.frame.row(0, named=True)
    assert none["n"] == 3 and none["valid_proposal_na"] == 1 and none["truncated_na"] == 1
    assert none["parse_failure"] == pytest.approx(0.6)             # (0.2 + 1.0) / 2
    assert none["valid_proposal"] == pytest.approx(0.4)            # (0.8 + 0.0) / 2
    assert none["truncated"] == pytest.approx(0.05)                # (0.1 + 0.0) / 2
    assert none["model_actions"] == 12
    assert none["parse_failure_pooled"] == pytest.approx(4 / 12)   # per model action
    assert none["valid_proposal_pooled"] == pytest.approx(8 / 12)
    assert none["truncated_pooled"] == pytest.approx(1 / 12)
    assert "parse_failure_rollout_mean" not in t.frame.columns
    v1 = t.frame.row(1, named=True)
    assert v1["paper_name"] == "cross-agent taint firewall" and v1["invalid_tool"] == 0.25
    assert "cross-agent taint firewall" in t.caption and "taint_only_v1" in t.caption
    assert "per-rollout" in t.caption and "_pooled" in t.caption


def test_table22_and_exposure_validity_agree_on_the_valid_call_rate():
    """The same label, the same number: exposure_validity's valid tool calls per model
    action (all stages) is Table 22's valid_proposal (both per-rollout means)."""
    from containmentbench.analysis.exposure import exposure_validity
    from containmentbench.analysis.paired import Settings

    rows = [{"scenario_id": f"s{i}", "cluster_id": f"c{i}", "stage": "security",
             "defense": "none", "n_model_calls": k, "n_model_actions": k,
             "n_valid_proposals": v, "valid_tool_proposal_rate": v / k,
             "truncated_rate": 0.0, "committed_harm": 0, "exposed": 1}
            for i, (k, v) in enumerate([(10, 9), (2, 0), (4, 2)])]
    df = frame(rows)
    t22 = D.table22(df, T.Context(df)).frame.row(0, named=True)
    ev = exposure_validity(df, T.Context(df), Settings(resamples=50, confidence=0.95, seed=1,
                                                             max_batch_elements=1 << 20)).frame
    got = ev.filter(pl.col("quantity").str.starts_with("valid tool calls"))["estimate"][0]
    assert t22["valid_proposal"] == pytest.approx((0.9 + 0.0 + 0.5) / 3) == pytest.approx(got)
    assert t22["valid_proposal_pooled"] == pytest.approx(11 / 16) != pytest.approx(got)


def test_exclusions_count_errors_by_kind_and_na_per_cell():
    df = frame([
        {"scenario_id": "s1", "stage": "security", "defense": "none", "committed_harm": 0,
         "exposed": None, "fn_exact_proposal": None},
        {"scenario_id": "s2", "stage": "security", "defense": "none", "committed_harm": 1,
         "exposed": 1, "fn_exact_proposal": True},
        {"scenario_id": "s3", "stage": "security", "defense": "none", "status": "error",
         "error_kind": "context_overflow"},
        {"scenario_id": "s4", "stage": "security", "defense": "none", "status": "error",
         "error_kind": "provider_error"},
        {"scenario_id": "s5", "stage": "security", "defense": "none", "status": "error",
         "error_kind": "provider_error"},
        {"scenario_id": "s6", "stage": "security", "defense": "none", "status": "step_limit",
         "committed_harm": 0, "exposed": 0, "fn_exact_proposal": False},
    ])
    row = T.table09(df, T.Context(df)).frame.row(0, named=True)
    # a step-limit rollout is an outcome; errors are not
    assert row["n"] == 3 and row["policy_violation"] == pytest.approx(1 / 3)
    assert (row["excluded_provider_error"], row["excluded_context_overflow"]) == (2, 1)
    assert (row["exposure_na"], row["exact_goal_proposal_na"]) == (1, 1)
    assert row["exposure"] == pytest.approx(0.5)
    z = zero_events(df.filter(pl.col("scenario_id") != "s2"), ["committed_harm"], ["security"])
    assert z.row(0, named=True)["n"] == 2
    assert z.row(0, named=True)["excluded_provider_error"] == 2
    means = T.stage_means(df, ["exposed"], T.Context(df)).frame.row(0, named=True)
    assert (means["n"], means["excluded_na"], means["excluded_context_overflow"]) == (2, 1, 1)
    # a metrics table written before error_kind existed: every error a provider error
    assert X.errors(df.drop("error_kind")) == {"excluded_provider_error": 3,
                                               "excluded_context_overflow": 0}


def test_pair_exclusions_say_why_a_rollout_is_in_no_pair():
    rows = []
    for sid, a, b in (("s1", 0.1, 0.2), ("s2", None, 0.3), ("s3", 0.4, "error"),
                      ("s4", 0.5, "missing")):
        rows.append({"scenario_id": sid, "stage": "security", "defense": "a",
                     "blast_radius_norm": a})
        if b == "error":
            rows.append({"scenario_id": sid, "stage": "security", "defense": "b",
                         "status": "error", "error_kind": "context_overflow"})
        elif b != "missing":
            rows.append({"scenario_id": sid, "stage": "security", "defense": "b",
                         "blast_radius_norm": b})
    df = frame(rows)
    ex = X.pair_exclusions(df, "a", "b", "security", "blast_radius_norm")
    # s2: a is N/A (b unmatched); s3: b overflowed (a unmatched); s4: b absent (a unmatched)
    assert ex == {"excluded_provider_error": 0, "excluded_context_overflow": 1,
                  "excluded_na": 1, "unmatched": 3}


def test_table14_states_its_denominator_and_subset_rules():
    rows = []
    for sid, done_a, done_b in (("s1", 1, 1), ("s2", 1, 0), ("s3", 0, 0)):
        for d, done, br in (("tool_boundary", done_a, 0.5), ("intent_ledger_v2", done_b, 0.3)):
            rows.append({"scenario_id": sid, "stage": "active_tainted", "defense": d,
                         "authorized_tainted_action_success": done, "blast_radius_norm": br,
                         "blast_radius_fixed": br / 2})
    df = frame(rows)
    sens = sensitivity(df, "tool_boundary", "intent_ledger_v2")
    sub = sens.filter(pl.col("scope") == "Authorized-completion subset").row(0, named=True)
    assert (sub["n_a"], sub["n_b"], sub["not_both_completed"]) == (1, 1, 2)
    assert (sub["mean_a"], sub["mean_b"]) == (0.5, 0.3)
    t = T.table14(sens, "tool_boundary", "intent_ledger_v2", T.Context(df))
    assert "ALL defenses of this study" in t.caption and "BOTH" in t.caption
    contrib = stage_contribution(df, "tool_boundary", "intent_ledger_v2",
                                 "blast_radius_norm", ["active_tainted"])
    assert contrib["excluded_na"].to_list() == [0, 0]


def test_table24_says_when_it_is_trivial():
    summary = {"input_model_actions": 10, "valid_tool_proposals_recovered": 0,
               "old_action_like_final_answers": 0, "new_action_like_final_answers": 0,
               "repaired_parses": 3, "invalid_tool_actions": 0,
               "status_counts_new": {"valid_strict_json": 7, "valid_repaired_json": 3},
               "parser_version": "p", "config_hash": "0" * 16, "skipped_rows": 2,
               "recorded_parser_versions": ["cb-parser/3"]}
    df = frame([{"scenario_id": "s", "stage": "security", "defense": "none"}])
    ctx = T.Context(df)
    cap = D.table24(summary, ctx).caption
    assert "trivial" in cap and "2 model calls without a parse status" in cap
    legacy = D.table24({**summary, "recorded_parser_versions": ["cb-parser/3+legacy"]}, ctx)
    assert "trivial" not in legacy.caption


def test_one_quantity_one_interval_across_tables():
    """The same defense's mean of the same metric over the same stages gets one interval,
    whichever table draws it (findings, Fig. 4's source, exposure and validity): its seed
    key is the quantity's (analysis/parallel.py quantity_key). Another key gives another
    interval on this frame, so the check can fail."""
    from containmentbench.analysis import figures
    from containmentbench.analysis.exposure import exposure_validity
    from containmentbench.analysis.headline import findings
    from containmentbench.analysis.paired import Settings
    from containmentbench.analysis.parallel import IntervalPool, cluster_ci

    s = Settings(resamples=400, confidence=0.95, seed=3, max_batch_elements=1 << 20)
    rows = [{"scenario_id": f"s{i}", "cluster_id": f"c{i}", "stage": st, "defense": d,
             "committed_harm": (i * 7 + len(d)) % 3 == 0, "blast_radius_norm": (i * 37 % 11) / 11,
             "exposed": 1, "fn_exact_proposal": i % 2 == 0}
            for i in range(30) for d in ("none", "tool_boundary")
            for st in ("security", "memory_recovery")]
    df = frame([{**r, "committed_harm": int(r["committed_harm"])} for r in rows])
    ctx = T.Context(df)
    f = findings(df, ctx, s).frame
    with IntervalPool(1) as pool:
        src, _ = figures.fig04(df, ctx, s, pool)()
        other = cluster_ci(df.filter(pl.col("defense") == "none"), "blast_radius_norm", s,
                           pool, "fig04", "none", "blast_radius_norm").get()
    ev = exposure_validity(df, ctx, s).frame
    for d in ("none", "tool_boundary"):
        for m in ("committed_harm", "blast_radius_norm"):
            a = f.filter((pl.col("defense") == d) & (pl.col("metric") == m)).row(0, named=True)
            b = src.frame.filter(pl.col("defense") == d).row(0, named=True)
            assert (a["ci_low"], a["ci_high"]) == (b[f"{m}_low"], b[f"{m}_high"]), (d, m)
        # committed harm on the attacked stages: here every stage of the study
        e = ev.filter((pl.col("defense") == d)
                      & pl.col("quantity").str.starts_with("committed harm")).row(0, named=True)
        assert e["n"] == 60
    none = f.filter((pl.col("defense") == "none") & (pl.col("metric") == "blast_radius_norm"))
    assert (other["ci_low"], other["ci_high"]) != (none["ci_low"][0], none["ci_high"][0])
