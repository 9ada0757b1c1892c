"""The test suite's wall time in one process and on every core (pytest-xdist), side by side.

Both runs use this checkout's venv and the same selection of tests; the second runs with
``-n <workers> --dist loadfile`` as ``make test`` does (a test module stays on one worker, so
its module-scoped study fixtures are built once). Printed: wall and CPU (user+sys of pytest and
every process it started) of each run, the count of tests each ran, the wall ratio, and the
load average before each run (a loaded machine makes both slower; compare the ratio).

    python bench/test_suite.py                    # the whole suite, serial then parallel
    python bench/test_suite.py tests/parser       # a part of it
    python bench/test_suite.py --workers 2
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(paths: list[str], extra: list[str]) -> tuple[float, float, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, *paths]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    tail = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    if proc.returncode != 0:
        sys.exit(f"bench/test_suite.py: error: {' '.join(cmd[3:])} failed: {tail}")
    return wall, cpu, tail


def _count(tail: str) -> int:
    return sum(int(n) for n in re.findall(r"(\d+) (?:passed|skipped|xfailed|xpassed)", tail))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["tests"], help="test paths (default: tests)")
    ap.add_argument("--workers", default="auto",
                    help="pytest-xdist workers for the parallel run (default: auto, one per core)")
    args = ap.parse_args()
    rows = []
    for label, extra in (("serial", []),
                         (f"-n {args.workers}", ["-n", args.workers, "--dist", "loadfile"])):
        load = os.getloadavg()[0]
        wall, cpu, tail = _run(args.paths, extra)
        rows.append((label, wall, cpu, _count(tail), load))
        print(f"{label:>10}: wall {wall:7.1f} s  cpu {cpu:7.1f} s  tests {_count(tail):5d}  "
              f"load before {load:.2f}  ({tail})", flush=True)
    (_, w0, _, n0, _), (_, w1, _, n1, _) = rows
    if n0 != n1:
        sys.exit(f"bench/test_suite.py: error: the runs ran {n0} and {n1} tests")
    print(f"parallel/serial wall: {w1 / w0:.2f} ({w0 / w1:.2f}x faster) on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
