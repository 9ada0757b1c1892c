"""Utility per topology (analysis/topology.py): means and intervals worked by hand, stages the
study lacks left out, the headline line only where a stage mixes topologies."""

from __future__ import annotations

import polars as pl

from containmentbench.analysis.bootstrap import cluster_bootstrap, cluster_codes
from containmentbench.analysis.paired import Settings
from containmentbench.analysis.tables import Context
from containmentbench.analysis.topology import headline_sentences, utility_by_topology

S = Settings(resamples=300, confidence=0.95, seed=5, max_batch_elements=1 << 20)
TOPOS = ("single", "supervisor_worker", "peer_chain")


def _frame(stages=("active_tainted", "clean"), topologies=TOPOS) -> pl.DataFrame:
    """Two defenses x 6 scenarios per stage (two per topology) x 2 seeds. Under none the
    single agent completes every task, the supervisor-worker pair none, the chain one of its
    two scenarios; under tool_boundary every topology one of two."""
    rows = []
    for stage in stages:
        for k in range(6):
            topo = topologies[k % len(topologies)]
            for seed in (1, 2):
                for d in ("none", "tool_boundary"):
                    if d == "none":
                        ok = {"single": 1, "supervisor_worker": 0}.get(topo, int(k < 3))
                    else:
                        ok = int(k < 3)
                    rows.append({
                        "study": "t", "model": "m", "backend": "vllm", "defense": d,
                        "stage": stage, "status": "ok", "seed": seed, "topology": topo,
                        "scenario_id": f"{stage}-{k}", "cluster_id": f"{stage}-{k}",
                        "authorized_tainted_action_success": ok if stage == "active_tainted"
                        else None,
                        "clean_benign_completion": ok if stage == "clean" else None})
    # a provider error is never an outcome: it must not count as a failure of its topology
    rows.append({**rows[0], "status": "error", "authorized_tainted_action_success": None,
                 "clean_benign_completion": None, "seed": 3})
    return pl.DataFrame(rows)


def _get(t, defense, metric, topo):
    return t.frame.filter((pl.col("defense") == defense) & (pl.col("metric") == metric)
                          & (pl.col("topology") == topo)).row(0, named=True)


def test_means_and_intervals_by_hand():
    df = _frame()
    t = utility_by_topology(df, Context(df), S)
    assert t.frame.height == 2 * 2 * 3
    a = _get(t, "none", "authorized_tainted_action_success", "single")
    assert (a["n"], a["n_clusters"], a["estimate"], a["stage"]) == (4, 2, 1.0, "active_tainted")
    w = _get(t, "none", "clean_benign_completion", "supervisor_worker")
    assert (w["estimate"], w["ci_low"], w["ci_high"]) == (0.0, 0.0, 0.0)
    c = _get(t, "none", "clean_benign_completion", "peer_chain")
    sub = df.filter((pl.col("defense") == "none") & (pl.col("stage") == "clean")
                    & (pl.col("topology") == "peer_chain"))
    ref = cluster_bootstrap(sub["clean_benign_completion"].cast(pl.Float64).to_numpy(),
                            cluster_codes(sub["cluster_id"]), n_resamples=S.resamples,
                            confidence=S.confidence,
                            seed=S.seed_for("topology", "none", "clean_benign_completion",
                                            "clean", "peer_chain"))
    assert (c["estimate"], c["ci_low"], c["ci_high"]) == (0.5, ref.low, ref.high)
    # topologies in their reading order
    assert t.frame.filter(pl.col("defense") == "none")["topology"].to_list()[:3] == list(TOPOS)


def test_a_stage_the_study_lacks_is_left_out():
    df = _frame(stages=("clean",))
    t = utility_by_topology(df, Context(df), S)
    assert set(t.frame["metric"].to_list()) == {"clean_benign_completion"}
    empty = _frame(stages=("security",)).with_columns(
        pl.lit(None, pl.Int64).alias("authorized_tainted_action_success"),
        pl.lit(None, pl.Int64).alias("clean_benign_completion"))
    assert utility_by_topology(empty, Context(empty), S).frame.height == 0


def test_headline_line_under_the_positive_control():
    df = _frame()
    t = utility_by_topology(df, Context(df), S)
    lines = headline_sentences(t.frame, ["none", "tool_boundary"])
    assert len(lines) == 2
    assert lines[1].startswith("Clean completion (clean utility) by topology under none: ")
    assert "single agent 1.000 [1.000, 1.000] (2 scenarios)" in lines[1]
    assert "supervisor-worker 0.000" in lines[1]
    assert "under tool_boundary" in headline_sentences(t.frame, ["tool_boundary"])[0]
    one = _frame(topologies=("single",))
    t1 = utility_by_topology(one, Context(one), S)
    assert headline_sentences(t1.frame, ["none"]) == []  # nothing to break down
