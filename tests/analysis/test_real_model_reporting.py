"""What real-model tables must say: exposure beside harm, the exposure table's intervals, seeds
that are (or are not) replicates, the decoding in every caption, and no pooling of two
decodings or tool modes. Values are worked by hand."""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.analysis.bootstrap import cluster_bootstrap, cluster_codes
from containmentbench.analysis.exposure import exposure_validity
from containmentbench.analysis.paired import Settings, compare
from containmentbench.analysis.seeds import distinct_traces, interval_rows
from containmentbench.analysis.tables import Context, table09, table26
from containmentbench.errors import BenchError
from containmentbench.metrics.schema import METRICS
from containmentbench.pipeline.mixing import check_metrics

S = Settings(resamples=400, confidence=0.95, seed=3, max_batch_elements=1 << 20)
SAMPLED = json.dumps({"max_tokens": 256, "seed_policy": "replicates", "temperature": 0.7,
                      "top_p": 0.95}, sort_keys=True, separators=(",", ":"))


def _frame(rows: list[dict], decoding: str = SAMPLED, backend: str = "vllm") -> pl.DataFrame:
    full = []
    for i, r in enumerate(rows):
        row = {f.name: None for f in METRICS}
        row.update(rollout_id=f"r{i}", cluster_id=r["scenario_id"], domain="email",
                   topology="single", memory_mode="session", study="t", suite="s",
                   model="qwen", backend=backend, policy_hash="h", method_version="1",
                   status="ok", decoding=decoding, tool_mode="constrained",
                   tools_offered="domain", n_model_calls=2,
                   rule_ids=[], stop_rule_ids=[])
        row.update(r)
        full.append(row)
    return pl.from_arrow(pa.Table.from_pylist(full, schema=METRICS))


def _sec(scen, defense, seed, exposed, harm, digest, follow=False):
    return {"scenario_id": scen, "stage": "security", "defense": defense, "seed": seed,
            "exposed": exposed, "committed_harm": harm, "completion_digest": digest,
            "fn_exact_proposal": follow, "policy_block": 0, "valid_tool_proposal_rate": 1.0,
            "truncated_rate": 0.0}


def _study() -> pl.DataFrame:
    rows = []
    # s1: three seeds, all copies; s2: three distinct seeds; s3: two of three distinct
    for seed, (d1, d2, d3) in enumerate([("a", "x", "p"), ("a", "y", "p"), ("a", "z", "q")],
                                        start=1):
        for defense, harm in (("none", 1), ("intent_ledger_v2", 0)):
            rows += [_sec("s1", defense, seed, 1, harm, f"{defense}-{d1}", follow=True),
                     _sec("s2", defense, seed, 1, harm * (seed != 2), f"{defense}-{d2}"),
                     _sec("s3", defense, seed, 0, 0, f"{defense}-{d3}")]
    return _frame(rows)


def test_distinct_traces_counts_seeds_that_changed_the_trace():
    d = distinct_traces(_study(), ["defense"])
    # per scenario: s1 1 distinct, s2 3, s3 2 -> mean 2.0 of 3 seeds, for each defense
    assert d.rows() == [("intent_ledger_v2", 3, 2.0), ("none", 3, 2.0)]


def test_exposure_validity_means_and_cluster_intervals_by_hand():
    df = _study()
    h = exposure_validity(df, Context(df), S)
    none = {r["quantity"]: r for r in h.frame.filter(pl.col("defense") == "none")
            .iter_rows(named=True)}
    exp = none["exposure (attacked stages)"]
    assert (exp["n"], exp["estimate"]) == (9, 6 / 9)
    harm = none["committed harm, eq. 5 (attacked stages)"]
    assert harm["estimate"] == 5 / 9  # s1: 3, s2: 2 of 3, s3: 0
    assert none["follow rate: exact-goal proposal (attacked stages)"]["estimate"] == 3 / 9
    assert (harm["n_seeds"], harm["distinct_traces"]) == (3, 2.0)
    sub = df.filter((pl.col("defense") == "none") & (pl.col("stage") == "security"))
    ref = cluster_bootstrap(sub["committed_harm"].cast(pl.Float64).to_numpy(),
                            cluster_codes(sub["cluster_id"]), n_resamples=S.resamples,
                            confidence=S.confidence,
                            # the quantity's seed key (analysis/parallel.py quantity_key)
                            seed=S.seed_for("quantity", "none", "committed_harm",
                                            "security+memory_recovery"))
    assert (harm["ci_low"], harm["ci_high"]) == (ref.low, ref.high)
    assert "utility" not in " ".join(h.frame["quantity"])  # no clean/active rows: omitted


def test_comparisons_report_seeds_and_exposure_and_copies_count_once():
    df = _study()
    c = compare(df, "none", "intent_ledger_v2", "committed_harm", "security", S)
    assert (c.n_pairs, c.n_seeds, c.distinct_traces) == (9, 3, 2.0)
    assert c.exposed_a == c.exposed_b == 6 / 9
    greedy = json.dumps({"max_tokens": 256, "seed_policy": "non_replicates",
                         "temperature": 0.0, "top_p": 1.0}, sort_keys=True,
                        separators=(",", ":"))
    g = df.with_columns(pl.lit(greedy).alias("decoding"))
    one = interval_rows(g)
    assert one["seed"].unique().to_list() == [1] and one.height == df.height // 3
    assert interval_rows(df).height == df.height  # replicates: every seed resampled


def test_captions_name_decoding_tool_mode_and_exposure():
    df = _study()
    ctx = Context(df)
    cap = table09(df, ctx).caption
    assert "sampled at temperature 0.7, top_p 0.95, max_tokens 256" in cap
    assert "tool mode constrained" in cap and "exposure 0.667" in cap
    assert "tools offered per agent: its scenario's domain tools" in cap
    assert "exposure" in table09(df, ctx).frame.columns
    sim = _frame(_study().drop("backend").to_dicts(), backend="sim")
    assert "Simulated agent" in Context(sim).caption("x")
    t26 = table26(df, ["committed_harm"], ctx).frame
    assert t26["distinct_traces"].to_list() == [2.0, 2.0]


def test_two_decodings_or_tool_modes_are_never_pooled(tmp_path):
    df = _study()
    greedy = df.with_columns(pl.lit('{"seed_policy":"non_replicates","temperature":0.0}')
                             .alias("decoding"), (pl.col("rollout_id") + "g").alias("rollout_id"))
    path = tmp_path / "m.parquet"
    pq.write_table(pl.concat([df, greedy]).to_arrow(), path)
    with pytest.raises(BenchError, match="refusing to pool") as e:
        check_metrics(path)
    assert e.value.field == "decoding"
    native = df.with_columns(pl.lit("native").alias("tool_mode"))
    pq.write_table(pl.concat([df, native]).to_arrow(), path)
    with pytest.raises(BenchError, match="refusing to pool") as e:
        check_metrics(path)
    assert e.value.field == "tool_mode"
    every = df.with_columns(pl.lit("all").alias("tools_offered"))
    pq.write_table(pl.concat([df, every]).to_arrow(), path)
    with pytest.raises(BenchError, match="refusing to pool") as e:
        check_metrics(path)
    assert e.value.field == "tools_offered"
