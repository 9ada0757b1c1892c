"""The adaptive smoke study through Snakemake end to end: frozen candidates, their replay
across the seven defenses, Tables 18-19 frozen and verified; a rerun is a no-op."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

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
    frozen = json.loads((run_dir / "adaptive" / "frozen" / "candidates_manifest.json")
                        .read_text())
    assert len(frozen["candidates"]) == 3
    search = json.loads((run_dir / "adaptive" / "search" / "candidates.json").read_text())
    assert all(n <= 10 for n in search["queries_per_restart"].values())
    t18 = (run_dir / "tables" / "table18_candidate_transfer.csv").read_text().splitlines()
    defenses = {ln.split(",")[2] for ln in t18[1:]}
    assert len(defenses) == 7 and {ln.split(",")[0] for ln in t18[1:]} == \
        {"instance_eval", "universal_eval"}
    t19 = (run_dir / "tables" / "table19_adaptive_qualification.csv").read_text()
    for stage in ("Known-good replay", "Development check", "Family-held-out check",
                  "Scoring-variant repeat"):
        assert stage in t19
    manifest = json.loads((run_dir / "MANIFEST.json").read_text())
    assert "tables/table18_candidate_transfer.csv" in manifest["files"]
    assert any(k.startswith("adaptive/frozen/candidates/") for k in manifest["files"])
    assert "matches its MANIFEST.json" in (run_dir / "logs" / "freeze.log").read_text()
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    again = run()
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()} == before
