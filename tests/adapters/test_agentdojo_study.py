"""The AgentDojo study through the normal pipeline steps (acceptance: a smoke study with the
ground-truth pipeline under all seven defenses gives tables through the normal analysis).

The same verbs the Snakemake rules call (``workflow/rules/agentdojo.smk``), in process, on
the smoke study restricted to the banking suite: qualification -> seven shards -> metrics ->
parity -> analyze -> freeze -> verify. Marked slow.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agentdojo")

from containmentbench.cli.main import main

pytestmark = pytest.mark.slow


def test_agentdojo_smoke_study_gives_tables(tmp_path):
    from containmentbench.config.compose import load_study, save_resolved
    from containmentbench.pipeline.plan import shards, study_dir

    data = load_study(["study=agentdojo_smoke", "study.adapter.suites=[banking]",
                       f"results_dir={tmp_path}"])
    sd = study_dir(data)
    cfg = sd / "config.yaml"
    save_resolved(data, cfg)
    plan = shards(data)
    assert len(plan) == 7 and {s.stage for s in plan} == {"banking"}
    q = sd / "qualification" / "banking.json"
    assert main(["adapters", "agentdojo-qualify", "--study-config", str(cfg), "--suite",
                 "banking", "--out", str(q)]) == 0
    rec = json.loads(q.read_text())
    assert rec["eligible"] == rec["candidates"][:3] and rec["parity_rows"] == rec["rows"] == 3
    for s in plan:
        out = sd / "traces" / s.id
        assert main(["adapters", "agentdojo", "--study-config", str(cfg), "--shard", s.id,
                     "--qualification", str(q), "--out", str(out)]) == 0
    m = sd / "metrics" / "rollout_metrics.parquet"
    assert main(["adapters", "metrics", str(sd / "traces"), "--out", str(m),
                 "--workers", "1"]) == 0
    assert main(["adapters", "parity", str(sd / "traces"), "--out",
                 str(sd / "adapter" / "parity.json")]) == 0
    assert main(["analyze", str(m), "--out", str(sd), "--config", str(cfg),
                 "--resamples", "200"]) == 0
    tables = {p.name for p in (sd / "tables").glob("*.md")}
    assert len(tables) >= 5
    # an AgentDojo study (clean and security stages only): every table rebuilds from
    # results.parquet alone (issue 35)
    from tests.report.test_results_table import assert_tables_rebuild
    assert "findings" in assert_tables_rebuild(sd)
    assert main(["freeze", str(sd)]) == 0 and main(["verify", str(sd)]) == 0

    import polars as pl
    df = pl.read_parquet(m)
    assert df.height == 7 * (3 + 3 * 2) and set(df["defense"]) == {
        "none", "prompt_only", "structured_guard", "tool_boundary", "taint_only_v1",
        "intent_ledger_v2", "rollback_v2"}
    harm = df.filter(pl.col("stage") == "security").group_by("defense").agg(
        pl.col("committed_harm").mean()).sort("defense")
    rate = dict(zip(harm["defense"], harm["committed_harm"]))
    assert rate["none"] > 0 and rate["intent_ledger_v2"] == 0
