"""The labelled suite's intervals, groups, AUC and unit cost, pinned by hand-computed values
and by an independent loop implementation of the case bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from containmentbench.audit.suite_stats import (
    RESAMPLES,
    auc,
    group_rows,
    prf_interval,
    rate_interval,
)
from containmentbench.audit.tables import unit_cost_rows
from containmentbench.canonical import derive_rng


def test_point_figures_by_hand() -> None:
    # tp 2 (cases 0, 1), fn 1 (case 2), fp 1 (case 3), tn 1 (case 4)
    r = prf_interval([True, True, True, False, False], [True, True, False, True, False],
                     ("t",), resamples=200)
    assert (r["tp"], r["fp"], r["fn"], r["tn"]) == (2, 1, 1, 1)
    assert r["precision"] == pytest.approx(2 / 3) and r["recall"] == pytest.approx(2 / 3)
    assert r["f1"] == pytest.approx(2 / 3)


def test_interval_equals_a_loop_over_the_same_resamples() -> None:
    """Case resampling written out scenario by scenario, quantiles by numpy's type 7."""
    rng = np.random.default_rng(7)
    pos = rng.random(60) < 0.5
    det = np.where(pos, rng.random(60) < 0.8, rng.random(60) < 0.2)
    got = prf_interval(pos.tolist(), det.tolist(), ("loop",))
    idx = derive_rng("taintbench-bootstrap", "loop").integers(0, 60, size=(RESAMPLES, 60))
    precs, recs = [], []
    for row in idx:
        tp = fp = fn = 0
        for i in row:
            tp += bool(pos[i] and det[i])
            fp += bool(not pos[i] and det[i])
            fn += bool(pos[i] and not det[i])
        if tp + fp:
            precs.append(tp / (tp + fp))
        if tp + fn:
            recs.append(tp / (tp + fn))
    for name, xs in (("precision", precs), ("recall", recs)):
        lo, hi = np.quantile(np.array(xs), [0.025, 0.975], method="linear")
        assert got[f"{name}_lo"] == pytest.approx(lo, abs=1e-12)
        assert got[f"{name}_hi"] == pytest.approx(hi, abs=1e-12)
        assert got[f"{name}_lo"] <= got[name] <= got[f"{name}_hi"]


def test_undefined_resamples_are_counted_not_scored() -> None:
    # one flagged case in 40: many resamples draw no flagged case, precision undefined there
    pos = [True] * 20 + [False] * 20
    det = [True] + [False] * 39
    r = prf_interval(pos, det, ("undef",))
    assert r["precision_undefined"] > 0 and r["recall_undefined"] == 0
    assert r["precision"] == 1.0


def test_same_key_same_bytes_other_key_other_draws() -> None:
    pos = [True, False] * 15
    det = [True, True, False] * 10
    a = prf_interval(pos, det, ("k", 1))
    assert a == prf_interval(pos, det, ("k", 1))
    assert prf_interval(pos, det, ("k", 2))["f1_lo"] != a["f1_lo"] or \
        prf_interval(pos, det, ("k", 2))["f1_hi"] != a["f1_hi"]


def test_auc_by_hand_and_against_mann_whitney() -> None:
    # (0.9 > 0.5) + (0.9 > 0.1) + (0.5 = 0.5: one half) + (0.5 > 0.1) = 3.5 of 4
    assert auc([0.9, 0.5], [0.5, 0.1]) == pytest.approx(0.875)
    assert auc([0.1], [0.2]) == 0.0 and auc([], [0.2]) is None
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    a, b = rng.random(30).round(2), rng.random(25).round(2)
    u = stats.mannwhitneyu(a, b, alternative="two-sided").statistic
    assert auc(a.tolist(), b.tolist()) == pytest.approx(u / (30 * 25))


def test_rate_interval() -> None:
    assert rate_interval([True] * 5, ("r",)) == (1.0, 1.0, 1.0)
    rate, lo, hi = rate_interval([True, False, False, False], ("r",))
    assert rate == 0.25 and 0.0 <= lo <= 0.25 <= hi <= 1.0


def test_groups_take_the_right_cases() -> None:
    def row(pos: bool, ev: str, sub: str, flag: bool) -> dict:
        return {"positive": pos, "evidence": ev if pos else "negative", "subfamily": sub,
                "neurotaint": flag}

    v = [row(True, "string", "s", True), row(True, "string", "s", True),
         row(True, "semantic", "m", False),
         row(False, "", "topical_overlap", True), row(False, "", "topical_overlap", False),
         row(False, "", "shared_clean", False)]
    g = {(r["group_kind"], r["group"]): r for r in group_rows(v, "neurotaint", ("g",))}
    # evidence group: its positives and every negative
    s = g[("evidence", "string")]
    assert (s["scenarios"], s["tp"], s["fp"], s["fn"]) == (5, 2, 1, 0)
    assert s["precision"] == pytest.approx(2 / 3) and s["fp_rate"] is None
    m = g[("evidence", "semantic")]
    assert (m["scenarios"], m["tp"], m["fn"], m["recall"]) == (4, 0, 1, 0.0)
    # negative kind: every positive and that kind's negatives
    t = g[("negative_kind", "topical_overlap")]
    assert (t["scenarios"], t["tp"], t["fp"], t["fn"]) == (5, 2, 1, 1)
    assert t["fp_rate"] == 0.5
    assert g[("negative_kind", "shared_clean")]["fp_rate"] == 0.0


def test_unit_cost_median_and_p90() -> None:
    units = [{"ms": 10.0, "sinks": 1, "judge_calls": 0, "replays": 1},
             {"ms": 20.0, "sinks": 2, "judge_calls": 2, "replays": 2},
             {"ms": 30.0, "sinks": 0, "judge_calls": 0, "replays": 0},
             {"ms": 40.0, "sinks": 4, "judge_calls": 4, "replays": 4}]
    ro, si = unit_cost_rows(units)
    # per rollout: median of 10, 20, 30, 40 = 25; p90 at position 2.7: 30 + 0.7 * 10 = 37
    assert (ro["n"], ro["ms_median"], ro["ms_p90"], ro["ms_mean"]) == (4, 25.0, 37.0, 25.0)
    assert ro["judge_calls"] == 6 and ro["judge_calls_median"] == 1.0
    # per sink, one value each: its rollout's time over its sinks (10/1 once, 20/2 twice,
    # 40/4 four times); a rollout without sinks adds none
    assert (si["n"], si["ms_median"], si["ms_p90"]) == (7, 10.0, 10.0)
    assert si["judge_calls_median"] == 1.0  # 0 once, 1 six times
    assert si["replays_median"] == 1.0
