"""Stale Snakemake locks after ``kill -9``: handled before the DAG is built.

Snakemake locks the working directory (``.snakemake/locks/``) while it runs and documents
``--unlock`` for a lock left by a killed run. The Snakefile's pre-flight does the same, but
only when the lock is provably stale: every run of this Snakefile records its PID under
``.snakemake/containmentbench-runs/`` for as long as it runs; locks present while none of the
recorded runs is alive were left by a killed run and are removed (what ``--unlock`` removes).
A lock held by a live run is never touched, so two runs on one folder still exclude each other.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

RUNS = "containmentbench-runs"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():  # a reused PID of another program does not hold our lock
        try:
            return b"snakemake" in cmdline.read_bytes()
        except OSError:
            return True
    return True


def handle_stale_locks(workdir: Path | None = None) -> list[Path]:
    """Remove locks of killed runs, then register this run; returns the removed locks."""
    meta = (workdir or Path.cwd()) / ".snakemake"
    runs, locks = meta / RUNS, meta / "locks"
    live = []
    if runs.is_dir():
        for f in runs.iterdir():
            if f.name.isdigit() and int(f.name) != os.getpid() and _alive(int(f.name)):
                live.append(f)
            elif f.name.isdigit() and int(f.name) != os.getpid():
                f.unlink(missing_ok=True)  # our own record of a run that is gone
    removed = []
    if not live and locks.is_dir():
        for lock in sorted(locks.glob("*.lock")):
            lock.unlink(missing_ok=True)
            removed.append(lock)
        if removed:
            print(f"containmentbench: removed {len(removed)} stale Snakemake lock(s) left by a "
                  f"killed run (no run of this workflow is alive)", file=sys.stderr)
    runs.mkdir(parents=True, exist_ok=True)
    me = runs / str(os.getpid())
    me.write_text("")
    atexit.register(lambda: me.unlink(missing_ok=True))
    return removed
