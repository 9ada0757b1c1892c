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

from containmentbench.integrity import writer

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
                writer.remove_owned(f, "run-record")  # our own record of a run that is gone
    removed = []
    if not live and locks.is_dir():
        for lock in sorted(locks.glob("*.lock")):
            # moved out of Snakemake's way, kept (what `--unlock` would delete)
            writer.move_aside(lock, meta / "containmentbench-stale-locks" / lock.name)
            removed.append(lock)
        if removed:
            print(f"containmentbench: set aside {len(removed)} stale Snakemake lock(s) left by "
                  f"a killed run (no run of this workflow is alive)", file=sys.stderr)
    me = runs / str(os.getpid())
    writer.write_text(me, "", kind="run-record", sync=False)
    atexit.register(lambda: writer.remove_owned(me, "run-record"))
    return removed
