"""full_main through Snakemake as `make run` runs it, beside the same study one step at a time.

Two runs of the same study (full_main, sim backend, this checkout's Snakefile) into scratch
results folders:

* **make run**: one ``snakemake --cores N`` (the DAG's own scheduling: independent steps share
  the cores). Each job's wall time comes from Snakemake's log (the time stamps before
  ``rule`` and ``Finished jobid``); the total is the wall of the whole command.
* **step by step**: one ``snakemake --until <rule>`` per step (a step alone on the machine),
  with its wall and CPU (user+sys of Snakemake and every job it ran, ``RUSAGE_CHILDREN``);
  each figure includes Snakemake's start-up and DAG building for that invocation.

Printed: one row per step with both runs' figures, the totals, the share of the sum of the
steps that the scheduled run saved, the load average before each run, and whether the two
runs wrote byte-identical traces, metrics, tables, audit and report data (wall-clock
measurements are left out of that comparison: the rollout timings, the audit's overhead table
and the report page that shows it).

On a machine where Slurm's ``scontrol`` is installed but no controller answers, every
Snakemake start waits ~9 s: the Slurm executor plugin asks ``scontrol show config`` when it
is imported, and Snakemake imports every installed executor plugin.

    python bench/make_run.py                # about 3-5 minutes on 2 cores
    python bench/make_run.py --cores 4 --keep /tmp/mr
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("scenarios", "rollout", "reparse", "audit", "metrics", "sensitivity", "bootstrap",
         "tables", "cases", "report", "freeze")
# what is compared between the two runs (timings.parquet holds wall-clock times; logs and
# Snakemake's bookkeeping are not results)
COMPARED = ("traces", "metrics", "reparse", "analysis", "tables", "audit", "report")
# wall-clock measurements: the rollout timings, the audit's overhead table (paper 001's cost
# per unit of work) and the report page that shows it
MEASURED_TIME = ("timings.parquet", "audit_overhead.", "report/index.html")
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _snake(cores: int, results: Path, extra: list[str]) -> tuple[float, float, str]:
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores), *extra,
           "--config", "study=full_main", f"overrides=[results_dir={results}]"]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "CB_HEADLINE": "0"})
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        sys.exit(f"bench/make_run.py: error: {' '.join(cmd[1:])} failed: {tail}")
    return wall, cpu, proc.stderr


def job_walls(log: str) -> dict[str, float]:
    """Seconds per rule (summed over its jobs) from Snakemake's log text."""
    now, rule, started, rule_of = None, None, {}, {}
    walls: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if m := STAMP.match(line):
            now = dt.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := re.match(r"(?:local)?rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.match(r"\s+jobid: (\d+)", line)) and rule:
            started[m.group(1)], rule_of[m.group(1)], rule = now, rule, None
        elif (m := re.match(r"Finished jobid: (\d+)", line)) and m.group(1) in started:
            walls[rule_of[m.group(1)]] += (now - started[m.group(1)]).total_seconds()
    return dict(walls)


def digests(run: Path) -> dict[str, str]:
    out = {}
    for top in COMPARED:
        for p in sorted((run / top).rglob("*")):
            rel = p.relative_to(run).as_posix()
            if p.is_file() and p.name != "SHA256SUMS" and \
                    not any(m in rel for m in MEASURED_TIME):
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2, help="Snakemake --cores (default 2)")
    ap.add_argument("--keep", type=Path, default=None, help="keep both results under this folder")
    args = ap.parse_args()
    if args.cores < 1:
        sys.exit("bench/make_run.py: error: --cores must be at least 1")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="cb-make-run-", dir=args.keep))
    try:
        load_a = os.getloadavg()[0]
        wall_a, cpu_a, log = _snake(args.cores, tmp / "scheduled", [])
        per_job = job_walls(log)
        load_b = os.getloadavg()[0]
        alone = {}
        for step in STEPS:
            target = ["all"] if step == "freeze" else ["--until", step]
            alone[step] = _snake(args.cores, tmp / "stepwise", target)[:2]
        a = tmp / "scheduled" / "full_main" / "sim-default"
        b = tmp / "stepwise" / "full_main" / "sim-default"
        da, db = digests(a), digests(b)
        same = da == db
        differ = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"full_main through Snakemake --cores {args.cores} on {os.cpu_count()} cores, sim "
          f"backend (simulated agent: harness figures). Load average before: make run "
          f"{load_a:.2f}, step by step {load_b:.2f}.")
    print("| step | make run: job wall s | alone: wall s | alone: CPU s |")
    print("| --- | ---: | ---: | ---: |")
    for step in STEPS:
        w, c = alone[step]
        print(f"| {step} | {per_job.get(step, 0.0):.1f} | {w:.1f} | {c:.1f} |")
    sum_w, sum_c = sum(w for w, _ in alone.values()), sum(c for _, c in alone.values())
    print(f"| **total** | **{wall_a:.1f}** (command wall; CPU {cpu_a:.1f}) | {sum_w:.1f} | "
          f"{sum_c:.1f} |")
    print(f"make run wall / sum of the steps alone: {wall_a / sum_w:.2f}")
    print(f"outputs byte-identical between the two runs ({len(da)} files: "
          f"{', '.join(COMPARED)}; wall-clock measurements left out: "
          f"{', '.join(MEASURED_TIME)}): {same}")
    if not same:
        print("differ: " + ", ".join(differ[:20]))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
