"""Shared fixtures: the committed suites and small helpers to run the CLI in-process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory):
    """This machine's records of keyed studies (``integrity/heads.py``) go to the session's
    folder (inherited by every Snakemake and CLI process a test starts), never to the
    developer's own ``~/.local/state``."""
    import os

    d = tmp_path_factory.mktemp("state")
    old = os.environ.get("CONTAINMENTBENCH_STATE_DIR")
    os.environ["CONTAINMENTBENCH_STATE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("CONTAINMENTBENCH_STATE_DIR", None)
    else:
        os.environ["CONTAINMENTBENCH_STATE_DIR"] = old


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def smoke():
    from containmentbench.scenarios.manifest import load_suite
    return load_suite(ROOT / "scenarios" / "smoke")


@pytest.fixture(scope="session")
def full_main():
    from containmentbench.scenarios.manifest import load_suite
    return load_suite(ROOT / "scenarios" / "full_main")


@pytest.fixture(scope="session")
def stress():
    from containmentbench.scenarios.manifest import load_suite
    return load_suite(ROOT / "scenarios" / "stress")


def run_cli(*args: str) -> int:
    from containmentbench.cli.main import main
    return main([str(a) for a in args])


#: the measurement fields every rollout row carries (trace schema 3), for tests that build
#: rollout rows by hand
ROLLOUT_MEASUREMENT = {
    "decoding": '{"max_tokens":512,"seed_policy":"replicates","temperature":0.7,"top_p":0.95}',
    "tool_mode": "prompt", "tools_offered": "all", "completion_digest": "0" * 64, "n_truncated": 0,
    "n_repeated_calls": 0, "n_blocked": 0}


# ------------------------------------------------------------------ a finished small study

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
#: the small smoke study several end-to-end modules start from (one seed, three defenses)
SMALL_SMOKE_OVERRIDES = ("study.seeds=[1]", "study.defenses=[none,prompt_only,tool_boundary]")
SMALL_SMOKE = ",".join(SMALL_SMOKE_OVERRIDES)  # as Snakemake's 'overrides=[...]' lists them


def results_arg(workdir: Path, results: Path) -> str:
    """``results_dir`` as Snakemake is given it: relative to its ``-d`` folder when inside it,
    so its metadata (``.snakemake/``, keyed by output path) holds when the folder is copied."""
    try:
        return results.relative_to(workdir).as_posix()
    except ValueError:
        return str(results)


@pytest.fixture(scope="session")
def finished_smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Snakemake folder (``-d``) holding the finished small smoke study under ``results/``,
    built once per test session and shared by the xdist workers (the first to ask builds it
    under a file lock). Tests copy it (:func:`copy_finished_smoke`) and never touch it."""
    import fcntl
    import os
    import subprocess

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the session's folder, shared by its workers
        root = root.parent
    cache = root / "finished-smoke"
    with open(root / "finished-smoke.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cache / "BUILT").exists():
            if cache.exists():
                import shutil
                shutil.rmtree(cache)
            cache.mkdir()
            res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(cache),
                                  "--cores", "2", "--config", "study=smoke",
                                  f"overrides=[results_dir=results,{SMALL_SMOKE}]"],
                                 capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stderr[-3000:]
            (cache / "BUILT").write_text("")
    return cache


def copy_finished_smoke(cache: Path, dest: Path) -> Path:
    """A copy of :func:`finished_smoke`'s folder at ``dest`` (file times kept, so Snakemake
    sees the same finished study there); returns ``dest``."""
    import shutil

    shutil.copytree(cache, dest, symlinks=True, ignore=shutil.ignore_patterns("BUILT"),
                    dirs_exist_ok=True)
    return dest
