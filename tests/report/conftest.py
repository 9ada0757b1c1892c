"""A small run directory for the viewer tests: the smoke suite under five defenses (seed 1),
reparse, metrics, case studies, a light analysis, the report before freeze, then freeze."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

DEFENSES = ("none", "tool_boundary", "taint_only_v1", "intent_ledger_v2", "rollback_v2")


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("viewer") / "smoke"
    for d in DEFENSES:
        assert run_cli("rollout", "--suite", "smoke", "--defense", d, "--seed", 1, "--out",
                       root / "traces" / "sim-default" / d / "seed=1", "--quiet") == 0
    assert run_cli("reparse", root / "traces", "--out", root / "reparse") == 0
    assert run_cli("metrics", root / "traces", "--out",
                   root / "metrics" / "rollout_metrics.parquet", "--workers", 1) == 0
    # the case studies and Table 28 first, as the pipeline runs them: the analysis's
    # results.parquet holds their numbers too (no provenance audit here: the pipeline's
    # smoke study, finished_smoke, has one)
    assert run_cli("cases", root) == 0
    assert run_cli("analyze", root / "metrics" / "rollout_metrics.parquet", "--out", root,
                   "--resamples", 200, "--reparse", root / "reparse" / "summary.json") == 0
    assert run_cli("report", root, "--before-freeze") == 0
    assert run_cli("freeze", root) == 0
    return root
