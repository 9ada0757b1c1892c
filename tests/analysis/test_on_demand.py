"""Any comparison on demand (analysis/on_demand.py): hand-computed values on a small frame,
the one-line errors, and the configured settings' determinism."""

from __future__ import annotations

import polars as pl
import pytest

from containmentbench.analysis.on_demand import comparison, text
from containmentbench.errors import BenchError

CFG = {"resamples": 2000, "confidence": 0.95, "seed": 7, "max_batch_elements": 1 << 20}


def _frame(backend: str = "sim") -> pl.DataFrame:
    # 6 scenarios in 3 clusters, one seed; committed_harm under "none" 1,1,1,0,0,0 and under
    # "guard" all 0: delta guard - none = -0.5 over 6 pairs, guard never worse (win rate
    # 0.5: the share of pairs where guard is strictly better)
    rows = []
    for i in range(6):
        for d, v in (("none", int(i < 3)), ("guard", 0)):
            rows.append({"study": "t", "model": "m", "backend": backend, "scenario_id": f"s{i}",
                         "seed": 1, "stage": "security", "cluster_id": f"c{i // 2}",
                         "defense": d, "status": "ok", "committed_harm": v,
                         "clean_benign_completion": None})
    # a clean-stage rollout of each defense, no committed_harm (N/A): never paired on it
    for d in ("none", "guard"):
        rows.append({"study": "t", "model": "m", "backend": backend, "scenario_id": "k",
                     "seed": 1, "stage": "clean", "cluster_id": "c9", "defense": d,
                     "status": "ok", "committed_harm": None, "clean_benign_completion": 1})
    return pl.DataFrame(rows)


def test_hand_computed_values():
    rec = comparison(_frame(), CFG, "none", "guard", "committed_harm", "all")
    assert rec["estimate"] == -0.5
    assert rec["n"] == 6 and rec["n_clusters"] == 3
    assert rec["mean_a"] == 0.5 and rec["mean_b"] == 0.0
    assert rec["win_rate"] == 0.5
    assert rec["ci_low"] <= -0.5 <= rec["ci_high"] <= 0.0
    # the three clusters' mean deltas are -1 (c0), -0.5 (c1: s2 -1, s3 0), 0 (c2), two pairs
    # each: a resample of three clusters is all c0 (mean -1) with probability 1/27 > 2.5%,
    # all c2 (mean 0) likewise, so the 95% percentile interval is [-1, 0] exactly; the
    # pair resample of six is all -1 with probability 1/64 < 2.5%: its bound is above -1
    assert (rec["ci_low"], rec["ci_high"]) == (-1.0, 0.0)
    assert -1.0 < rec["pair_ci_low"] < -0.5 < rec["pair_ci_high"] < 0.0
    assert rec["comparison"] == "none vs guard" and rec["interval"] == "cluster"
    assert rec["sim_agent"] is True and rec["interpretation"]


def test_same_settings_same_numbers_and_stage_filter():
    a = comparison(_frame(), CFG, "none", "guard", "committed_harm", "security")
    b = comparison(_frame(), CFG, "none", "guard", "committed_harm", "security")
    assert a == b
    assert a["n"] == 6  # the clean rollouts have no committed_harm
    clean = comparison(_frame(), CFG, "none", "guard", "committed_harm", "clean")
    assert clean["n"] == 0 and clean["estimate"] is None and clean["ci_low"] is None
    assert "no pairs" in clean["interpretation"]


def test_real_backend_is_not_labelled_sim():
    rec = comparison(_frame("vllm"), CFG, "none", "guard", "committed_harm")
    assert rec["sim_agent"] is False
    assert "Simulated agent" not in text(rec)
    assert "Simulated agent" in text(comparison(_frame(), CFG, "none", "guard",
                                                "committed_harm"))


@pytest.mark.parametrize("a,b,metric,stage,field", [
    ("nope", "guard", "committed_harm", "all", "a"),
    ("none", "nope", "committed_harm", "all", "b"),
    ("none", "none", "committed_harm", "all", "b"),
    ("none", "guard", "not_a_metric", "all", "metric"),
    ("none", "guard", "study", "all", "metric"),
    ("none", "guard", "committed_harm", "nowhere", "stage"),
])
def test_unknown_names_are_one_line_errors(a, b, metric, stage, field):
    with pytest.raises(BenchError) as exc:
        comparison(_frame(), CFG, a, b, metric, stage)
    assert exc.value.field == field
    assert "\n" not in exc.value.render()


def test_configured_claim_equals_its_table12_row():
    """A claim of the analysis config, through the bootstrap part and Table 12's builder,
    and the same pair on demand: the same numbers (each interval's seed comes from its key)."""
    from containmentbench.analysis.paired import zero_events
    from containmentbench.analysis.parts import bootstrap_part
    from containmentbench.analysis.tables import Context, table12

    df = _frame()
    cfg = {**CFG, "comparisons": [{"a": "none", "b": "guard", "metric": "committed_harm",
                                   "stage": "security", "claim": True}],
           "sweep": {"baseline": "none", "metrics": []}, "divergence": []}
    part = bootstrap_part(df, cfg, ["none", "guard"], workers=1)
    claims = [c for claim, c in part["configured"] if claim]
    frame = table12(claims, zero_events(df, [], []), Context(df), []).frame
    row = frame.row(0, named=True)
    rec = comparison(df, cfg, "none", "guard", "committed_harm", "security")
    got = {k: row[k] for k in ("estimate", "ci_low", "ci_high", "n", "win_rate")}
    assert got == {k: rec[k] for k in got}
    # and the numbers are the hand-computed ones, not merely equal to each other
    assert (rec["estimate"], rec["n"]) == (-0.5, 6)
