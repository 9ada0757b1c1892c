"""A study means one thing, end to end with the real Snakemake (a small finished smoke study):

* nothing about the machine enters a hashed file: a run folder copied to another
  ``results_dir`` verifies, and a run there has nothing to do and changes nothing;
* a defense dropped from ``study.defenses`` is reported by ``status`` and the dry run, then
  leaves metrics and every table, its shards moved to ``retired/``, and ``verify`` holds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from containmentbench.cli.main import main
from tests.conftest import ROOT, SMALL_SMOKE, copy_finished_smoke, results_arg

pytestmark = pytest.mark.slow
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
BASE = "study.seeds=[1]"
ALL = "study.defenses=[none,prompt_only,tool_boundary]"
assert f"{BASE},{ALL}" == SMALL_SMOKE  # the session's finished study is this one


def _snakemake(workdir: Path, results: Path, defenses: str, *extra: str
               ) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(workdir),
                           "--cores", "2", *extra, "--config", "study=smoke",
                           f"overrides=[results_dir={results_arg(workdir, results)},{BASE},"
                           f"{defenses}]"],
                          capture_output=True, text=True, timeout=600)


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory,
             finished_smoke: Path) -> tuple[Path, Path]:
    # a copy of the session's finished smoke study (built by one `snakemake` run, tests/conftest.py)
    base = copy_finished_smoke(finished_smoke, tmp_path_factory.mktemp("changes"))
    return base, base / "results" / "smoke" / "sim-default"


def test_copied_study_verifies_and_a_run_there_changes_nothing(finished, finished_smoke,
                                                               tmp_path):
    base, run = finished
    covered = json.loads((run / "MANIFEST.json").read_text())["files"]
    for rel in covered:  # no hashed file names the machine's results folder
        for folder in (base, finished_smoke):  # this copy's, or the one it was built in
            assert str(folder).encode() not in (run / rel).read_bytes(), rel
    other = tmp_path / "moved" / "results"
    shutil.copytree(base / "results", other)  # copy2: file times kept
    copy = other / "smoke" / "sim-default"
    assert main(["verify", str(copy)]) == 0
    before = _snapshot(other)
    dry = _snakemake(base, other, ALL, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr, dry.stdout[-2000:]
    res = _snakemake(base, other, ALL)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _snapshot(other) == before
    assert main(["verify", str(copy)]) == 0


def test_dropped_defense_leaves_metrics_and_tables(finished, capsys):
    base, run = finished
    kept = "study.defenses=[none,tool_boundary]"
    assert main(["status", "study=smoke", f"results_dir={base / 'results'}", BASE, kept]) == 0
    assert "4 shard(s) on disk are no longer part of the study" in capsys.readouterr().out
    before = _snapshot(base / "results")
    dry = _snakemake(base, base / "results", kept, "-n")
    assert _snapshot(base / "results") == before
    out = dry.stdout + dry.stderr
    assert "no longer part of the study" in out and "rule metrics" in out, out[-3000:]

    res = _snakemake(base, base / "results", kept)
    assert res.returncode == 0, res.stderr[-3000:]
    metrics = pq.read_table(run / "metrics" / "rollout_metrics.parquet", columns=["defense"])
    assert set(metrics.column("defense").to_pylist()) == {"none", "tool_boundary"}
    for sub in ("tables", "audit/tables", "reparse"):
        for p in (run / sub).rglob("*"):
            if p.is_file() and p.suffix in (".csv", ".json", ".md"):
                assert "prompt_only" not in p.read_text(), p
    assert sorted(p.name for p in (run / "traces" / "sim-default").iterdir()
                  if any(p.rglob("SHA256SUMS"))) == ["none", "tool_boundary"]
    assert any((run / "retired" / "sim-default" / "prompt_only").rglob("SHA256SUMS"))
    assert main(["verify", str(run)]) == 0
    again = _snakemake(base, base / "results", kept, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
