"""Data safety on a FINISHED study (local executor, a small smoke study):

* a dry run in every spelling (``-n``, ``-nc1``, ``-pn``, a profile or ``SNAKEMAKE_PROFILE``
  with ``dry-run: true``) leaves every file's bytes and mtime unchanged, even with corrupt
  shards, and lists the rollout job a real run redoes and everything after it;
* a run the lock refuses (another run holds it) changes nothing, even with a changed config;
* one plain ``snakemake`` run repairs a flipped byte, a truncated Parquet file and an empty
  ``SHA256SUMS``: the shards are quarantined (kept) and redone, everything downstream is
  rebuilt, ``verify`` passes and the tables are byte-identical to before;
* pointing every ``--out`` at a copy of the finished study leaves all its files in place;
* a lock left by a killed run does not stop a plain rerun.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from containmentbench.cli.main import main
from tests.conftest import ROOT, SMALL_SMOKE, copy_finished_smoke, results_arg

pytestmark = pytest.mark.slow
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
SMALL = SMALL_SMOKE


def _snakemake(workdir: Path, results: Path, *extra: str, overrides: str = "",
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(workdir),
                           "--cores", "2", *extra, "--config", "study=smoke",
                           f"overrides=[results_dir={results_arg(workdir, results)},"
                           f"{SMALL}{overrides}]"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory,
             finished_smoke: Path) -> tuple[Path, Path, Path]:
    # a copy of the session's finished smoke study (built by one `snakemake` run, tests/conftest.py)
    base = copy_finished_smoke(finished_smoke, tmp_path_factory.mktemp("fault"))
    study = base / "results" / "smoke" / "sim-default"  # the model's run directory
    ref = base / "reference"
    shutil.copytree(study, ref)
    return base, study, ref


def _corrupt(study: Path) -> list[str]:
    shards = sorted(p.parent for p in (study / "traces").rglob("SHA256SUMS"))
    a, b, c = shards[0], shards[4], shards[8]
    p = a / "events.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    q = b / "rollouts.parquet"
    q.write_bytes(q.read_bytes()[: q.stat().st_size // 3])
    (c / "SHA256SUMS").write_text("")
    return [d.relative_to(study / "traces").as_posix() for d in (a, b, c)]


def _profile(base: Path, name: str, key: str) -> Path:
    d = base / "profiles" / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(f"{key}: true\ncores: 1\n")
    return d


def _jobs(out: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:")[1], re.M)) \
        if "Job stats:" in out else {}


def test_every_entry_of_a_study_is_covered_or_listed(finished):
    """Coverage by rule: each top-level entry a study writes is covered by its manifest or
    listed, with the reason, as not covered (integrity/frozen.py)."""
    from containmentbench.integrity.frozen import COVERED_DIRS, COVERED_FILES, NOT_COVERED

    study = finished[1]
    names = {p.name for p in study.iterdir() if not p.name.startswith(".")}
    assert names - set(COVERED_DIRS) - set(COVERED_FILES) - set(NOT_COVERED) == set()
    assert {"tables", "audit", "analysis", "traces"} <= names


def test_dry_run_changes_nothing_then_one_run_repairs(finished):
    base, study, ref = finished
    damaged = _corrupt(study)
    before = _snapshot(base / "results")
    profile = _profile(base, "dry", "dry-run")
    env_profile = _profile(base, "dry_env", "dryrun")
    for extra, env in ((["-n"], None), (["-nc1"], None), (["-pn"], None),
                       (["--profile", str(profile)], None),
                       ([], {"SNAKEMAKE_PROFILE": str(env_profile)})):
        dry = _snakemake(base, base / "results", *extra, env=env)
        assert dry.returncode == 0, (extra, dry.stderr[-3000:])
        assert _snapshot(base / "results") == before, extra  # bytes and mtimes
        for sid in damaged:
            assert f"corrupt shard {sid}" in dry.stderr, extra
        # the DAG shows what a real run does: the job again, and everything after it
        out = dry.stdout + dry.stderr
        assert "jobs/seed-1.redo-1.done" in out, extra
        assert {"rollout", "metrics", "tables", "freeze"} <= set(_jobs(out)), extra

    intact = {k: v for k, v in _snapshot(study / "traces").items()
              if not any(k.startswith(sid + "/") for sid in damaged)}
    run = _snakemake(base, base / "results")
    assert run.returncode == 0, run.stderr[-3000:]
    # the three damaged shards are redone, nothing else: every other shard file untouched
    after = _snapshot(study / "traces")
    assert {k: after[k] for k in intact} == intact
    for sid in damaged:
        assert (study / "traces" / sid / "SHA256SUMS").is_file()
    for sid in damaged:
        assert (study / "quarantine" / f"{sid}.0").is_dir()  # kept, never deleted
    assert main(["verify", str(study)]) == 0
    compared = 0
    # the defenses' hook time is a wall-clock table (analysis.json names it): not compared
    wall = set(json.loads((ref / "analysis.json").read_text()).get("wall_clock", []))
    for sub in ("tables", "figures", "metrics", "reparse"):
        for a in sorted((ref / sub).rglob("*")):
            if a.is_file() and a.suffix not in (".png", ".pdf") \
                    and a.relative_to(ref).as_posix() not in wall:
                assert a.read_bytes() == (study / a.relative_to(ref)).read_bytes(), a
                compared += 1
    assert compared > 10
    again = _snakemake(base, base / "results", "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_run_refused_by_the_lock_changes_nothing(finished):
    """Another run holds the lock: this one, with a corrupt shard and a changed config (an
    operational setting, so config.yaml would be rewritten), is refused before it writes."""
    base, study, _ = finished
    _corrupt(study)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)",
                               "snakemake-lock-holder"])
    meta = base / ".snakemake"
    try:
        (meta / "containmentbench-runs").mkdir(parents=True, exist_ok=True)
        (meta / "containmentbench-runs" / str(holder.pid)).write_text("")
        (meta / "locks").mkdir(exist_ok=True)
        # the output as Snakemake names it (results_dir relative to its -d folder)
        (meta / "locks" / "0.output.lock").write_text(
            f"{results_arg(base, study / 'MANIFEST.json')}\n")
        before = _snapshot(base / "results")
        res = _snakemake(base, base / "results", overrides=",cluster.metrics_workers=1")
        assert res.returncode != 0 and "cannot be locked" in res.stdout + res.stderr
        assert _snapshot(base / "results") == before
        assert (meta / "locks" / "0.output.lock").exists()  # a live run's lock is kept
    finally:
        holder.kill()
        holder.wait()
        (meta / "locks" / "0.output.lock").unlink(missing_ok=True)
        (meta / "containmentbench-runs" / str(holder.pid)).unlink(missing_ok=True)


@pytest.mark.parametrize("argv", [
    ["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--out", "{s}",
     "--quiet"],
    ["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--out", "{s}",
     "--quiet", "--force"],
    ["replay", "--suite", "smoke", "--out", "{s}"],
    ["cim", "export", "--traces", "{s}/traces", "--out", "{s}"],
    ["cim", "export", "--traces", "{s}/traces", "--out", "{s}", "--force"],
    ["cim", "generate", "--out", "{s}", "--users", "10", "--agents", "100"],
    ["metrics", "{s}/traces", "--out", "{s}"],
    ["metrics", "{s}/traces", "--out", "{s}/analysis.json"],
    ["reparse", "{s}/traces", "--out", "{s}"],
    ["scenarios", "generate", "--suite", "smoke", "--out", "{s}", "--force"],
    ["report", "{s}", "--out", "{s}", "--force"],
])
def test_out_at_a_finished_study_leaves_it_in_place(finished, argv, tmp_path, capsys):
    ref = finished[2]
    copy = tmp_path / "copy"
    shutil.copytree(ref, copy)
    before = _snapshot(tmp_path)
    rc = main([a.replace("{s}", str(copy)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "field 'out'" in err[0], err
    assert _snapshot(tmp_path) == before


def test_paths_are_quoted_and_checked(tmp_path):
    """A space in results_dir is data (rules quote paths); metacharacters and `..` in names
    are refused before any rule runs."""
    results = tmp_path / "with space"
    res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                          "-n", "-p", "--config", "study=smoke",
                          f"overrides=[results_dir='{results}']"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    shell = [ln for ln in (res.stdout + res.stderr).splitlines()
             if ln.startswith("Shell command:") and "containmentbench" in ln]
    assert len(shell) >= 8  # every rule's command ...
    for line in shell:       # ... names the folder only inside quotes
        assert f"'{results}/smoke/" in line and f" {results}/" not in line, line
    for bad, field in (("study.name=../../x", "study.name"),
                       (f"results_dir='{tmp_path}/a$(touch X)'", "results_dir")):
        res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                              "-n", "--config", "study=smoke", f"overrides=[{bad}]"],
                             capture_output=True, text=True, timeout=300)
        err = [ln for ln in res.stderr.splitlines() if ln.startswith("containmentbench")]
        assert res.returncode == 2 and len(err) == 1 and f"field '{field}'" in err[0], err
    assert not (tmp_path / "X").exists() and not (tmp_path.parent / "x").exists()
