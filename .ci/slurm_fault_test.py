#!/usr/bin/env python3
"""CI fault test on a real single-node Slurm (started by slurm/local_up.sh).

1. A clean local run of the smoke study gives the reference tables.
2. The same study runs through `snakemake --executor slurm` (profile slurm/profile-local-ci),
   one rollout job per defense (cluster.rollout_group=defense_seed, four shards each); one
   job is cancelled with `scancel` after it finished some of its shards but not all, and the
   run is allowed to fail.
3. A finished shard of another job is corrupted.
4. The rerun redoes exactly the cancelled job's unfinished shards and the corrupt shard
   (checked from the shard folders' checksum files), reruns only those two jobs (from its
   log), and the final tables and metrics are byte-identical to the local reference.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
WORK = Path(os.environ.get("CB_CI_WORK", "/tmp/cb-ci"))
COMMON = "study.seeds=[1]"
GROUP = "cluster.rollout_group=defense_seed"
MODEL = "sim-default"  # the run directory of the study's model: <results>/smoke/<model>/


def run(cmd: list[str], log: Path, check: bool = True) -> int:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT).returncode
    print(f"  {' '.join(cmd[:3])} ... -> rc {rc} in {time.perf_counter() - t0:.0f} s "
          f"(log {log})", flush=True)
    if check and rc != 0:
        print(log.read_text()[-4000:])
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    return rc


def snakemake_slurm(results: Path, extra: list[str]) -> list[str]:
    return [str(BIN / "snakemake"), "--profile", "slurm/profile-local-ci", *extra,
            "--config", "study=smoke",
            f"overrides=[cluster=slurm_local,results_dir={results},{COMMON},{GROUP},"
            f"++backend.options.latency_ms=300]"]


def rollout_jobs_in_log(text: str) -> set[str]:
    """Names of the rollout jobs a Snakemake log shows it ran."""
    out = set()
    for block in re.split(r"\n(?=\[|rule |localrule )", text):
        if re.search(r"^(local)?rule rollout:", block, re.M):
            # a job redone after a repair asks for its next marker (<job>.redo-<n>.done)
            m = re.search(r"output: \S*/jobs/(\S+?)(?:\.redo-\d+)?\.done", block)
            if m:
                out.add(m.group(1))
    return out


def finished_shards(traces: Path) -> dict[str, int]:
    """Shard id -> mtime (ns) of its SHA256SUMS, for every finished shard."""
    return {p.parent.relative_to(traces).as_posix(): p.stat().st_mtime_ns
            for p in traces.rglob("SHA256SUMS")}


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    t_all = time.perf_counter()
    local, slurm = WORK / "local", WORK / "slurm"
    print("1. local reference run", flush=True)
    run([str(BIN / "snakemake"), "--cores", "2", "--config", "study=smoke",
         f"overrides=[results_dir={local},{COMMON}]"], WORK / "local.log")

    print("2. slurm run with one rollout job cancelled mid-run", flush=True)
    t0 = time.perf_counter()
    log1 = WORK / "slurm-run1.log"
    with open(log1, "w") as fh:
        proc = subprocess.Popen(snakemake_slurm(slurm, ["--retries", "0"]), cwd=ROOT,
                                stdout=fh, stderr=subprocess.STDOUT)
    run_dir = slurm / "smoke" / MODEL
    traces = run_dir / "traces"
    victim = None
    deadline = time.time() + 600
    logs = run_dir / "logs" / "rollout"
    while victim is None and proc.poll() is None and time.time() < deadline:
        q = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"],
                           capture_output=True, text=True).stdout
        running = dict(reversed(line.split("|", 1)) for line in q.splitlines() if "|" in line)
        # a job that has started (log exists), finished some shards but not all of them
        for logf in sorted(logs.glob("*.log")) if logs.exists() else []:
            job = logf.stem
            if (run_dir / "jobs" / f"{job}.done").exists():
                continue
            defense = job.split(".")[0]
            done = [d for d in (traces / MODEL / defense).rglob("SHA256SUMS")]
            if not done:
                continue
            comment = next((c for c in running if c.startswith("rule_rollout_wildcards_")
                            and c.endswith(f"_{job}")), None)
            if comment is not None:
                subprocess.run(["scancel", running[comment]], check=True)
                victim = job
                print(f"  cancelled Slurm job {running[comment]} running rollout job {job} "
                      f"after {len(done)} of its shards", flush=True)
                break
        time.sleep(0.2)
    rc1 = proc.wait()
    print(f"  run 1 ended with rc {rc1} after {time.perf_counter() - t0:.0f} s", flush=True)
    if victim is None:
        raise SystemExit("no running rollout job with finished shards was seen to cancel")
    if rc1 == 0:
        raise SystemExit("run 1 should fail: a rollout job was cancelled")
    if (run_dir / "jobs" / f"{victim}.done").exists():
        raise SystemExit(f"cancelled job {victim} looks finished")
    victim_defense = victim.split(".")[0]
    unfinished = {f"{MODEL}/{victim_defense}/seed=1/{stage}/shard-000"
                  for stage in ("security", "memory_recovery", "active_tainted", "clean")}
    unfinished -= set(finished_shards(traces))
    if not unfinished:
        raise SystemExit(f"cancelled job {victim} had finished every shard")

    print("3. corrupt a finished shard of another job", flush=True)
    done = finished_shards(traces)
    corrupt = next(sid for sid in sorted(done) if sid.split("/")[1] != victim_defense)
    p = traces / corrupt / "events.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    st = subprocess.run([str(BIN / "containmentbench"), "status", "study=smoke", "cluster=slurm_local",
                         f"results_dir={slurm}", COMMON, GROUP,
                         "++backend.options.latency_ms=300"],
                        cwd=ROOT, capture_output=True, text=True)
    print("  status: " + st.stdout.strip(), flush=True)
    before = finished_shards(traces)

    print("4. rerun: only the unfinished and the corrupt shards are redone", flush=True)
    t0 = time.perf_counter()
    log2 = WORK / "slurm-run2.log"
    run(snakemake_slurm(slurm, []), log2)
    t_rerun = time.perf_counter() - t0
    after = finished_shards(traces)
    redone = {sid for sid, t in after.items() if before.get(sid) != t}
    expected = unfinished | {corrupt}
    print(f"  shards redone: {sorted(redone)}", flush=True)
    if redone != expected:
        raise SystemExit(f"rerun redid {sorted(redone)}, expected {sorted(expected)}")
    jobs_run = rollout_jobs_in_log(log2.read_text())
    corrupt_job = f"{corrupt.split('/')[1]}.seed-1"
    if jobs_run != {victim, corrupt_job}:
        raise SystemExit(f"rerun ran jobs {sorted(jobs_run)}, expected "
                         f"{sorted({victim, corrupt_job})}")
    if not any((run_dir / "quarantine").rglob("events.parquet")):
        raise SystemExit("the corrupt shard was not kept in quarantine")

    print("5. final tables byte-identical to the local run", flush=True)
    compared = 0
    # wall-clock tables (the defense hooks' measured time) are declared by the study itself in
    # analysis.json; reproduce and freeze leave them out of byte comparisons, and so does this
    study_dir = local / "smoke" / MODEL
    wall_clock = set(json.loads((study_dir / "analysis.json").read_text()).get("wall_clock", []))
    for sub in ("tables", "figures", "metrics", "reparse"):
        for a in sorted((study_dir / sub).rglob("*")):
            if a.is_dir() or a.suffix in (".png", ".pdf"):
                continue
            if a.relative_to(study_dir).as_posix() in wall_clock:
                continue
            b = slurm / "smoke" / MODEL / a.relative_to(local / "smoke" / MODEL)
            if not b.exists() or a.read_bytes() != b.read_bytes():
                raise SystemExit(f"differs from the local run: {a.relative_to(local)}")
            compared += 1
    run([str(BIN / "containmentbench"), "verify", str(run_dir)], WORK / "verify.log")
    print(f"slurm fault test passed: {compared} files identical; rerun {t_rerun:.0f} s; "
          f"total {time.perf_counter() - t_all:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
