"""full_main at 1x and 10x seeds through Snakemake: per-rollout CPU of every step, side by side.

The same study (full_main, sim backend, this checkout's Snakefile) runs twice into scratch
results folders: with ``study.seeds`` 1..5 (17,640 rollouts) and 1..50 (176,400 rollouts).
Each step is one ``snakemake --until <rule>`` invocation, so its CPU (user+sys of Snakemake
and every job process it ran, from ``RUSAGE_CHILDREN``) and wall time are measured alone.
Each step's figure includes Snakemake's own start-up and DAG building for that invocation.

Linear growth means the per-rollout CPU at 10x is about that at 1x (ratio ~1.0); the
analysis (sensitivity, bootstrap, tables) has fixed costs and should grow less than linearly.

The provenance audit, case studies and report hold every trace's events in one process; at
10x they need far more memory than this machine's 24 GiB may allow, so they run at 1x and,
with ``--with-audit``, at 10x too.

    python bench/scale_10x.py                 # 1x and 10x (about 15 minutes on 2 cores)
    python bench/scale_10x.py --scales 1      # 1x only
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLLOUTS_PER_SEED = 504 * 7  # full_main: 504 scenarios x 7 defenses
STEPS = ("rollout", "metrics", "reparse", "sensitivity", "bootstrap", "tables")
LATE = ("audit", "cases", "report", "freeze")


def _children() -> tuple[float, int]:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_maxrss


def run_scale(scale: int, cores: int, late: bool, keep: Path | None) -> list[dict]:
    seeds = list(range(1, 5 * scale + 1))
    tmp = Path(tempfile.mkdtemp(prefix=f"cb-scale{scale}x-", dir=keep))
    config = ["--config", "study=full_main",
              f"overrides=[study.seeds=[{','.join(map(str, seeds))}],results_dir={tmp}]"]
    snake = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores)]
    out = []
    try:
        for step in STEPS + (LATE if late else ()):
            cpu0, _ = _children()
            t0 = time.perf_counter()
            target = ["all"] if step == "freeze" else ["--until", step]
            subprocess.run(snake + target + config, cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wall = time.perf_counter() - t0
            cpu1, rss = _children()
            out.append({"scale": scale, "step": step, "rollouts": ROLLOUTS_PER_SEED * len(seeds),
                        "wall_s": wall, "cpu_s": cpu1 - cpu0, "maxrss_gib": rss / 2**20})
            print(f"  {scale:2d}x {step:12s} wall {wall:7.1f} s  CPU {cpu1 - cpu0:7.1f} s",
                  file=sys.stderr, flush=True)
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--with-audit", action="store_true",
                    help="also run audit, cases, report and freeze at scales above 1x")
    ap.add_argument("--keep", type=Path, default=None, help="keep the results under this folder")
    args = ap.parse_args()
    rows = []
    for scale in args.scales:
        rows += run_scale(scale, args.cores, scale == 1 or args.with_audit, args.keep)
    load = os.getloadavg()[0]
    print(f"full_main through Snakemake (--cores {args.cores}, sim backend; load average "
          f"{load:.1f} on {os.cpu_count()} cores). CPU = user+sys of Snakemake and its jobs; "
          "each step includes Snakemake's start-up and DAG building.")
    print("| step | scale | rollouts | wall s | CPU s | CPU ms / rollout | ratio to 1x |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = {r["step"]: r for r in rows if r["scale"] == 1}
    for r in rows:
        per = 1000 * r["cpu_s"] / r["rollouts"]
        b = base.get(r["step"])
        ratio = per / (1000 * b["cpu_s"] / b["rollouts"]) if b and r["scale"] != 1 else 1.0
        print(f"| {r['step']} | {r['scale']}x | {r['rollouts']:,} | {r['wall_s']:.1f} | "
              f"{r['cpu_s']:.1f} | {per:.3f} | {ratio:.2f} |")
    for scale in args.scales:
        sel = [r for r in rows if r["scale"] == scale and r["step"] in STEPS]
        cpu = sum(r["cpu_s"] for r in sel)
        n = sel[0]["rollouts"]
        print(f"{scale}x rollouts to tables: {cpu:.1f} s CPU = {1000 * cpu / n:.3f} ms CPU per "
              f"rollout, {sum(r['wall_s'] for r in sel):.1f} s wall; peak RSS of one process "
              f"so far {max(r['maxrss_gib'] for r in sel):.2f} GiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
