"""Metamorphic tests of the metric suite (hypothesis): transformations of the rollout metrics
whose effect on every table follows from the definitions (eq. 7 stage means, eq. 12 paired
deltas, Table 5 scoping), so each test states the exact expected change and checks nothing
else moved. Trace-level relations (a rolled-back commit) and shard layout are in
tests/metrics/test_metamorphic_traces.py."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from containmentbench.analysis import diagnostic_tables, paired, tables
from containmentbench.analysis.bootstrap import cluster_bootstrap, pair_bootstrap
from containmentbench.analysis.paired import Settings, compare
from containmentbench.metrics.schema import METRICS, STAGE_SCOPE
from tests.conftest import ROLLOUT_MEASUREMENT

DEFENSES = ("none", "tool_boundary", "intent_ledger_v2")
STAGES = ("security", "active_tainted", "clean")
MEANS = ("committed_harm", "wrong_recipient", "blast_radius_norm", "benign_success",
         "authorized_tainted_action_success", "clean_benign_completion", "rollback_count")
S = Settings(resamples=300, confidence=0.95, seed=7, max_batch_elements=1 << 20)
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)


def _row(rng, stage, scen, defense, seed, rid):
    row = {f.name: None for f in METRICS}
    row.update(rollout_id=rid, scenario_id=scen, cluster_id=scen, stage=stage, domain="email",
               topology="single", memory_mode="none", study="meta", suite="meta",
               model="sim:default", backend="sim", defense=defense, policy_hash="h",
               method_version="v", seed=seed, status="ok", n_model_calls=3, rule_ids=[],
               stop_rule_ids=[], decoding=ROLLOUT_MEASUREMENT["decoding"], tool_mode="prompt",
               completion_digest=f"{scen}/{defense}/{seed}")
    for f in METRICS:
        if row[f.name] is not None or f.name in ("carrier", "attack_goal", "agent_profile"):
            continue
        if pa.types.is_integer(f.type):
            row[f.name] = int(rng.integers(0, 2))
        elif pa.types.is_floating(f.type):
            row[f.name] = float(rng.integers(0, 8)) / 8  # dyadic: exact sums
    for name, scope in STAGE_SCOPE.items():
        if stage not in scope:
            row[name] = None
    return row


def frame(seed: int, n_scen: int = 4, seeds=(1, 2)) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [_row(rng, stage, f"{stage[:3]}-{i}", d, s, f"r-{stage[:3]}-{i}-{d}-{s}")
            for stage in STAGES for i in range(n_scen) for d in DEFENSES for s in seeds]
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=METRICS))


def _means(df: pl.DataFrame) -> dict[tuple[str, str, str], tuple[int, float]]:
    f = tables.stage_means(df, MEANS, tables.Context(df)).frame
    return {(r["stage"], r["defense"], r["metric"]): (r["n"], r["estimate"])
            for r in f.iter_rows(named=True)}


def _exact(df: pl.DataFrame, stage: str, defense: str, metric: str) -> tuple[int, float]:
    vals = df.filter((pl.col("stage") == stage) & (pl.col("defense") == defense)
                     & (pl.col("status") != "error"))[metric].drop_nulls().to_list()
    return len(vals), float(sum(Fraction(v) for v in vals) / len(vals))


def _tables(df: pl.DataFrame) -> list[pl.DataFrame]:
    ctx = tables.Context(df)
    return [tables.stage_means(df, MEANS, ctx).frame, tables.table09(df, ctx).frame,
            tables.table11(df, ctx).frame, diagnostic_tables.table22(df, ctx).frame]


@SETTINGS
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_permuting_rows_changes_nothing(seed, perm_seed):
    df = frame(seed)
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=perm_seed)
    for a, b in zip(_tables(df), _tables(shuffled)):
        assert a.equals(b)
    assert compare(df, "none", "tool_boundary", "committed_harm", "all", S) == \
        compare(shuffled, "none", "tool_boundary", "committed_harm", "all", S)


@SETTINGS
@given(st.integers(0, 10_000))
def test_stage_means_are_exact_eq7(seed):
    df = frame(seed)
    for (stage, d, m), got in _means(df).items():
        assert got == _exact(df, stage, d, m)


@SETTINGS
@given(st.integers(0, 10_000))
def test_renaming_defenses_only_renames(seed):
    df = frame(seed)
    names = {d: f"renamed_{i}" for i, d in enumerate(DEFENSES)}
    ren = df.with_columns(pl.col("defense").replace_strict(names))
    back = {v: k for k, v in names.items()}
    assert {(st_, back[d], m): v for (st_, d, m), v in _means(ren).items()} == _means(df)
    # intervals are seeded by the comparison's key, which names the defenses; with the seed
    # held fixed, nothing else in eq. 12 depends on a defense's name
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Settings, "seed_for", lambda self, *key: 12345)
        c = compare(df, "none", "intent_ledger_v2", "benign_success", "all", S)
        r = compare(ren, names["none"], names["intent_ledger_v2"], "benign_success", "all", S)
    assert (c.n_pairs, c.mean_a, c.mean_b, c.delta, c.win_rate, c.pair, c.cluster) == \
        (r.n_pairs, r.mean_a, r.mean_b, r.delta, r.win_rate, r.pair, r.cluster)


@SETTINGS
@given(st.integers(0, 10_000), st.sampled_from([1, 2]))
def test_duplicating_a_seed_reweights_exactly(seed, dup):
    df = frame(seed)
    copy = df.filter(pl.col("seed") == dup).with_columns(
        pl.lit(9, pl.Int64).alias("seed"), (pl.col("rollout_id") + "-dup").alias("rollout_id"))
    big = pl.concat([df, copy])
    before, after = _means(df), _means(big)
    assert after.keys() == before.keys()
    for key, (n, _) in after.items():
        sub_n = copy.filter((pl.col("stage") == key[0]) & (pl.col("defense") == key[1]))[
            key[2]].drop_nulls().len()
        assert n == before[key][0] + sub_n          # N grows by the copied rows
        assert (n, after[key][1]) == _exact(big, *key)  # eq. 7 over the enlarged set
    c0 = compare(df, "none", "tool_boundary", "committed_harm", "all", S)
    c1 = compare(big, "none", "tool_boundary", "committed_harm", "all", S)
    pairs_dup = paired.pairs(copy, "none", "tool_boundary", "committed_harm", "all").height
    assert c1.n_pairs == c0.n_pairs + pairs_dup


@SETTINGS
@given(st.integers(0, 10_000), st.sampled_from(STAGES), st.sampled_from(DEFENSES))
def test_adding_a_clean_rollout_changes_one_cell(seed, stage, defense):
    df = frame(seed)
    rng = np.random.default_rng(seed + 1)
    new = _row(rng, stage, "new-0", defense, 1, "r-new")
    for m in ("committed_harm", "wrong_recipient", "secret_leakage", "unauthorized_action",
              "harm_attempt", "rollback_count"):
        new[m] = 0
    new["blast_radius_norm"] = 0.0
    big = pl.concat([df, pl.from_arrow(pa.Table.from_pylist([new], schema=METRICS))])
    before, after = _means(df), _means(big)
    for key, val in after.items():
        if key[:2] == (stage, defense):
            assert val == _exact(big, *key) and val[0] == before[key][0] + 1
        else:
            assert val == before[key]
    # a scenario no other defense ran adds no pair (eq. 12 keys on scenario, model, seed)
    other = next(d for d in DEFENSES if d != defense)
    assert compare(big, defense, other, "committed_harm", "all", S) == \
        compare(df, defense, other, "committed_harm", "all", S)


@SETTINGS
@given(st.integers(0, 10_000), st.sampled_from(["committed_harm", "benign_success",
                                                "blast_radius_norm"]))
def test_intervals_contain_estimate_and_swap_flips_sign(seed, metric):
    df = frame(seed, n_scen=6)
    ab = compare(df, "none", "intent_ledger_v2", metric, "all", S)
    ba = compare(df, "intent_ledger_v2", "none", metric, "all", S)
    for c in (ab, ba):
        for iv in (c.pair, c.cluster):
            assert iv.low <= iv.estimate <= iv.high
            assert iv.estimate == pytest.approx(c.delta, abs=1e-12)
    assert (ba.n_pairs, ba.mean_a, ba.mean_b) == (ab.n_pairs, ab.mean_b, ab.mean_a)
    assert ba.delta == -ab.delta
    # the resampled distribution of -d mirrors that of d: bounds swap and flip sign (up to
    # Monte Carlo error, since the two comparisons draw their own resamples)
    for x, y in ((ab.pair, ba.pair), (ab.cluster, ba.cluster)):
        assert y.low == pytest.approx(-x.high, abs=0.25)
        assert y.high == pytest.approx(-x.low, abs=0.25)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5, 0.125]), min_size=1, max_size=60),
       st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_every_interval_contains_its_estimate(values, n_clusters, seed):
    x = np.array(values)
    labels = [i % n_clusters for i in range(len(values))]
    for iv in (pair_bootstrap(x, n_resamples=200, seed=seed),
               cluster_bootstrap(x, labels, n_resamples=200, seed=seed)):
        assert iv.low <= iv.estimate <= iv.high
    # swapping the pair negates every delta, and so the estimate, exactly
    neg = pair_bootstrap(-x, n_resamples=200, seed=seed)
    assert neg.estimate == -pair_bootstrap(x, n_resamples=200, seed=seed).estimate
