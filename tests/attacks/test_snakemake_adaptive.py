"""The adaptive smoke study through Snakemake end to end: Table 18 in the paper's protocol
(the first, non-target-preserving search replayed under no defense, tool-boundary and the
cross-agent taint firewall, the instance audit under no defense only), the target-preserving
search behind Table 19, Tables 18-19 frozen, verified and reproduced; a rerun is a no-op.
The named variant and defense-specific optimization after a passing qualification."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT
from tests.report.test_results_table import assert_tables_rebuild

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


@pytest.mark.slow
def test_adaptive_smoke_study_end_to_end_and_rerun_is_noop(tmp_path):
    def run():
        return subprocess.run(
            [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "2",
             "--config", "study=adaptive_smoke", f"overrides=[results_dir={tmp_path}/results]"],
            capture_output=True, text=True, timeout=600)

    res = run()
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = tmp_path / "results" / "adaptive_smoke" / "sim-default"
    for name, tp in (("transfer", False), ("target", True)):
        frozen = json.loads((run_dir / "adaptive" / "frozen" / name / "candidates_manifest.json")
                            .read_text())
        assert len(frozen["candidates"]) == 3 and frozen["search"] == name
        assert frozen["target_preserving"] is tp
        search = json.loads((run_dir / "adaptive" / "search" / name / "candidates.json")
                            .read_text())
        assert all(n <= 10 for n in search["queries_per_restart"].values())
    t18 = pl.read_parquet(run_dir / "tables" / "table18_candidate_transfer.parquet")
    assert set(t18["search"]) == {"first search (not target-preserving)"}
    assert sorted(zip(t18["mode"], t18["evaluated_defense"])) == [
        ("instance_eval", "none"), ("universal_eval", "none"),
        ("universal_eval", "taint_only_v1"), ("universal_eval", "tool_boundary")]
    decision = json.loads((run_dir / "adaptive" / "defense_specific" / "decision.json")
                          .read_text())
    qual = json.loads((run_dir / "adaptive" / "qualification" / "qualification.json")
                      .read_text())
    assert decision["attempted"] == qual["proceed_to_defense_specific"]
    t19 = (run_dir / "tables" / "table19_adaptive_qualification.csv").read_text()
    for stage in ("Known-good replay", "Development check", "Family-held-out check",
                  "Scoring-variant repeat"):
        assert stage in t19
    # every table of the adaptive study rebuilds from results.parquet alone (issue 35)
    assert {"findings", "table18_candidate_transfer"} <= set(assert_tables_rebuild(run_dir))
    manifest = json.loads((run_dir / "MANIFEST.json").read_text())
    assert "tables/table18_candidate_transfer.csv" in manifest["files"]
    assert any(k.startswith("adaptive/frozen/transfer/candidates/") for k in manifest["files"])
    assert "matches its MANIFEST.json" in (run_dir / "logs" / "freeze.log").read_text()
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    again = run()
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()} == before

    rep = subprocess.run(
        [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "reproduce",
         "--cores", "2", "--config", "study=adaptive_smoke",
         f"overrides=[results_dir={tmp_path}/results]"],
        capture_output=True, text=True, timeout=600)
    assert rep.returncode == 0, rep.stderr[-3000:]
    log = (tmp_path / "results" / "adaptive_smoke" / "logs" / "reproduce.log").read_text()
    assert "byte-identical" in log and "matches its MANIFEST.json" in log


@pytest.mark.slow
def test_named_variant_and_defense_specific_optimization(tmp_path):
    """The target-preserving protocol (every study defense, both modes) with a held-out
    criterion the sim agent meets: defense-specific optimization runs, bounded, and its
    candidates are replayed under their own defense only."""
    res = subprocess.run(
        [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--cores", "2",
         "--config", "study=adaptive_smoke",
         f"overrides=[results_dir={tmp_path}/results,"
         "study.adaptive.table18_protocol=target_preserving,"
         "study.adaptive.heldout_min_rate=0.25]"],
        capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = tmp_path / "results" / "adaptive_smoke" / "sim-default"
    assert not (run_dir / "adaptive" / "search" / "transfer").exists()
    qual = json.loads((run_dir / "adaptive" / "qualification" / "qualification.json")
                      .read_text())
    assert qual["proceed_to_defense_specific"], qual["stop_reason"]
    decision = json.loads((run_dir / "adaptive" / "defense_specific" / "decision.json")
                          .read_text())
    assert decision["attempted"] and set(decision["defenses"]) == {"tool_boundary",
                                                                   "taint_only_v1"}
    for d, rec in decision["defenses"].items():
        assert all(n <= 10 for n in rec["queries_per_restart"].values())
        log = [json.loads(x) for x in (run_dir / "adaptive" / "defense_specific" / d /
                                       "search" / "queries.jsonl").read_text().splitlines()]
        assert log[0]["settings"]["search"]["optimized_for"] == d
    t18 = pl.read_parquet(run_dir / "tables" / "table18_candidate_transfer.parquet")
    tp = t18.filter(pl.col("search") == "target-preserving search")
    assert tp.height == 14  # seven defenses x two modes
    ds = t18.filter(pl.col("search").str.starts_with("defense-specific"))
    assert sorted(zip(ds["optimized_for"], ds["evaluated_defense"], ds["mode"])) == [
        ("taint_only_v1", "taint_only_v1", "universal_eval"),
        ("tool_boundary", "tool_boundary", "universal_eval")]
