"""analyze: the paper's tables from rollout metrics, hand-checked statistics on tiny frames,
captions naming the simulated agent, and byte-stable output."""

from __future__ import annotations

import polars as pl
import pytest

from containmentbench.analysis.paired import (
    Settings,
    divergence,
    stage_contribution,
    zero_events,
)
from containmentbench.config.loader import load_option
from containmentbench.metrics.schema import PROJECTION
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    for d in ("none", "tool_boundary", "taint_only_v1", "intent_ledger_v2"):
        for seed in (1, 2):
            assert run_cli("rollout", "--suite", "smoke", "--defense", d, "--seed", seed,
                           "--out", root / "traces" / d / f"seed={seed}", "--quiet") == 0
    assert run_cli("metrics", root / "traces", "--out",
                   root / "metrics" / "rollout_metrics.parquet", "--workers", 1) == 0
    return root


def test_tables_written_with_sim_captions(study, tmp_path):
    out = tmp_path / "a"
    assert run_cli("analyze", study / "metrics" / "rollout_metrics.parquet", "--out", out,
                   "--resamples", 500) == 0
    names = {p.stem for p in (out / "tables").glob("*.md")}
    for t in ("table03_stage_accounting", "table09_security_positive_control",
              "table10_trajectory_divergence", "table11_utility", "table12_claim_critical",
              "table13_stage_contribution", "table14_denominator_sensitivity",
              "table15_memory_recovery", "table22_interface_diagnostic",
              "table25_paired_comparisons", "table26_seed_variance", "stage_means"):
        assert t in names
        for ext in ("md", "csv", "tex", "parquet"):
            assert (out / "tables" / f"{t}.{ext}").exists()
        md = (out / "tables" / f"{t}.md").read_text()
        assert "Simulated agent (sim backend)" in md and "model sim:default" in md
        assert r"\toprule" in (out / "tables" / f"{t}.tex").read_text()
    for f in ("fig03_authorized_completion", "fig04_operating_points"):
        assert (out / "figures" / f"{f}.png").exists() and (out / "figures" / f"{f}.pdf").exists()
    # not every comparison's defenses were run: they are listed, not silently dropped
    import json
    info = json.loads((out / "analysis.json").read_text())
    assert any("rollback_v2" in s for s in info["skipped"])


def test_analysis_is_byte_stable(study, tmp_path):
    for name in ("a", "b"):
        assert run_cli("analyze", study / "metrics" / "rollout_metrics.parquet", "--out",
                       tmp_path / name, "--resamples", 300) == 0
    for p in (tmp_path / "a" / "tables").iterdir():
        assert p.read_bytes() == (tmp_path / "b" / "tables" / p.name).read_bytes(), p.name


def _frame(rows):
    base = {"scenario_id": "s", "model": "m", "seed": 1, "stage": "security", "cluster_id": "s",
            "status": "ok", "committed_harm": 0, "defense": "a",
            "authorized_tainted_action_success": None, "clean_benign_completion": None,
            "recovery_success": None, "benign_success": 1}
    base.update({f: 0.0 for f in PROJECTION if f not in base})
    return pl.DataFrame([{**base, **r} for r in rows])


SET = Settings(resamples=200, confidence=0.95, seed=1, max_batch_elements=1 << 20)


def test_divergence_by_hand():
    rows = []
    for i in range(4):
        rows.append({"scenario_id": f"s{i}", "cluster_id": f"s{i}", "defense": "a",
                     "blast_radius_norm": 0.5})
        rows.append({"scenario_id": f"s{i}", "cluster_id": f"s{i}", "defense": "b",
                     "blast_radius_norm": 0.5 if i < 2 else 0.25})
    # pair s3 differs in committed harm: excluded from the outcome-conditioned set
    rows[-1]["committed_harm"] = 1
    d = divergence(_frame(rows), "a", "b", "all", SET)
    assert d["pairs"] == 4 and d["same_endpoint"] == 3
    assert d["trajectory_divergence"] == pytest.approx(1 / 3)  # only s2 of {s0, s1, s2}
    assert d["utility_divergence"] == 0.0 and d["union"] == pytest.approx(1 / 3)


def test_stage_contribution_by_hand():
    rows = []
    for stage, n, ma, mb in (("security", 3, 0.6, 0.3), ("clean", 1, 0.0, 0.0)):
        for i in range(n):
            rows.append({"scenario_id": f"{stage}{i}", "cluster_id": f"{stage}{i}",
                         "stage": stage, "defense": "a", "blast_radius_norm": ma})
            rows.append({"scenario_id": f"{stage}{i}", "cluster_id": f"{stage}{i}",
                         "stage": stage, "defense": "b", "blast_radius_norm": mb})
    t = stage_contribution(_frame(rows), "a", "b", "blast_radius_norm", ["security", "clean"])
    sec = t.filter(pl.col("stage") == "security").row(0, named=True)
    # weighted gap = (N_g / N) (mean_a - mean_b) = 3/4 * 0.3 = 0.225; the whole gap
    assert sec["weighted_gap"] == pytest.approx(0.225) and sec["gap_share"] == pytest.approx(1)
    allr = t.filter(pl.col("stage") == "all").row(0, named=True)
    assert allr["mean_a"] - allr["mean_b"] == pytest.approx(0.225)


def test_zero_event_bounds_rows():
    rows = [{"scenario_id": f"s{i}", "cluster_id": f"s{i}", "seed": seed, "defense": "b"}
            for i in range(192) for seed in (1, 2)]
    z = zero_events(_frame(rows), ["committed_harm"], ["all"])
    r = z.row(0, named=True)
    assert (r["n"], r["n_clusters"]) == (384, 192)
    assert r["cluster_rule_of_three"] == pytest.approx(3 / 192)
    assert r["rollout_exact_95"] == pytest.approx(1 - 0.05 ** (1 / 384))


def test_default_config_has_enough_intervals():
    cfg = load_option("analysis", "default")
    per_defense = len(cfg["sweep"]["metrics"])
    n = 2 * (len(cfg["comparisons"]) + 6 * per_defense) + len(cfg["divergence"])
    assert n >= 83  # §6.5: the frozen analysis holds 83 intervals

