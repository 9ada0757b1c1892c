"""Tests for the seed-variance table (paper Appendix J, Table 26)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from containmentbench.analysis.seeds import seed_variance


def _rows(stage, defense, metric, per_seed_values):
    return [
        {"stage": stage, "defense": defense, "metric": metric, "seed": seed, "value": v}
        for seed, values in enumerate(per_seed_values)
        for v in values
    ]


KEYS = ["stage", "defense", "metric"]


def test_hand_computed_groups():
    rows = _rows("active", "v2", "completion", [[1, 1, 0, 1], [1, 0], [0, 0, 1, 1]])
    rows += _rows("security", "v2", "spread", [[0.5, 0.7]])
    out = seed_variance(pl.DataFrame(rows), KEYS, "seed", "value")
    assert out.columns == [*KEYS, "n_seeds", "mean", "std", "range"]
    assert out["stage"].to_list() == ["active", "security"]  # sorted by keys
    active = out.row(0, named=True)
    # Per-seed means 0.75, 0.5, 0.5: mean of means, not of rows (0.6).
    assert active["n_seeds"] == 3
    assert active["mean"] == pytest.approx(statistics.mean([0.75, 0.5, 0.5]))
    assert active["std"] == pytest.approx(statistics.stdev([0.75, 0.5, 0.5]))
    assert active["range"] == pytest.approx(0.25)
    security = out.row(1, named=True)
    assert security["n_seeds"] == 1
    assert security["mean"] == pytest.approx(0.6)
    assert security["std"] is None  # ddof=1 is undefined for one seed
    assert security["range"] == 0.0


def test_table_26_shape_five_seeds():
    # Five seeds of 120 active-tainted rollouts with per-seed completion counts.
    successes = [100, 104, 106, 101, 103]
    rows = _rows("active", "v2", "completion", [[1] * k + [0] * (120 - k) for k in successes])
    row = seed_variance(pl.DataFrame(rows), KEYS, "seed", "value").row(0, named=True)
    means = [k / 120 for k in successes]
    assert row["n_seeds"] == 5
    assert row["mean"] == pytest.approx(sum(successes) / 600)
    assert row["std"] == pytest.approx(np.std(means, ddof=1))
    assert row["range"] == pytest.approx((106 - 100) / 120)


def test_nulls_are_ignored_and_all_null_seeds_do_not_count():
    df = pl.DataFrame(
        {"g": ["a"] * 5, "seed": [0, 0, 1, 2, 2], "value": [1.0, None, None, 0.0, 1.0]}
    )
    row = seed_variance(df, ["g"], "seed", "value").row(0, named=True)
    assert row["n_seeds"] == 2  # seed 1 has no value
    assert row["mean"] == pytest.approx(0.75)  # per-seed means 1.0 and 0.5
    assert row["range"] == pytest.approx(0.5)


def test_boolean_values_lazy_frames_and_no_keys():
    df = pl.DataFrame({"seed": [0, 0, 1, 1], "ok": [True, False, True, True]})
    expected = {"n_seeds": 2, "mean": 0.75, "std": math.sqrt(0.125), "range": 0.5}
    for frame in (df, df.lazy()):
        row = seed_variance(frame, [], "seed", "ok").row(0, named=True)
        assert row == pytest.approx(expected)


def test_empty_frame_gives_empty_table():
    df = pl.DataFrame(
        {"g": [], "seed": [], "value": []},
        schema={"g": pl.String, "seed": pl.Int64, "value": pl.Float64},
    )
    out = seed_variance(df, ["g"], "seed", "value")
    assert out.height == 0
    assert out.columns == ["g", "n_seeds", "mean", "std", "range"]


@pytest.mark.parametrize(
    ("keys", "seed_col", "value_col", "match"),
    [
        (["missing"], "seed", "value", "missing column"),
        (["g"], "seed", "label", "must be numeric"),
        (["g", "seed"], "seed", "value", "seed_col 'seed' is also a key"),
        (["g", "value"], "seed", "value", "value_col 'value' is also a key"),
        (["g", "g"], "seed", "value", "duplicate keys"),
        ("g", "seed", "value", "list of column names"),
        (["g"], "value", "value", "both 'value'"),
    ],
)
def test_bad_arguments(keys, seed_col, value_col, match):
    df = pl.DataFrame({"g": ["a"], "seed": [0], "value": [1.0], "label": ["x"]})
    with pytest.raises(ValueError, match=match):
        seed_variance(df, keys, seed_col, value_col)


@settings(max_examples=30, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 4),
            st.floats(-10, 10, allow_nan=False),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_matches_a_plain_python_implementation(data):
    df = pl.DataFrame(data, schema=["g", "seed", "value"], orient="row")
    out = seed_variance(df, ["g"], "seed", "value")
    groups: dict[str, dict[int, list[float]]] = {}
    for g, seed, value in data:
        groups.setdefault(g, {}).setdefault(seed, []).append(value)
    assert out["g"].to_list() == sorted(groups)
    for row in out.iter_rows(named=True):
        means = [statistics.fmean(v) for v in groups[row["g"]].values()]
        assert row["n_seeds"] == len(means)
        assert row["mean"] == pytest.approx(statistics.fmean(means), abs=1e-9)
        assert row["range"] == pytest.approx(max(means) - min(means), abs=1e-9)
        if len(means) == 1:
            assert row["std"] is None
        else:
            assert row["std"] == pytest.approx(statistics.stdev(means), abs=1e-9)
