#!/usr/bin/env python3
"""CI fault test on a real single-node Slurm (started by slurm/local_up.sh).

1. A clean local run of the smoke study gives the reference tables.
2. The same study runs through `snakemake --executor slurm` (profile slurm/profile-local-ci);
   one rollout job is cancelled with `scancel` while it runs, and the run is allowed to fail.
3. Another finished shard's Parquet is corrupted.
4. The rerun redoes only those two shards (checked from its log), and the final tables and
   metrics are byte-identical to the local reference.
"""

from __future__ import annotations

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
            f"overrides=[cluster=slurm_local,results_dir={results},{COMMON},"
            f"++backend.options.latency_ms=300]"]


def rollout_jobs_in_log(text: str) -> set[str]:
    """Shard ids of the rollout jobs a Snakemake log shows it ran."""
    out = set()
    for block in re.split(r"\n(?=\[|rule |localrule )", text):
        if re.search(r"^(local)?rule rollout:", block, re.M):
            m = re.search(r"output: \S*/traces/(\S+)/SHA256SUMS", block)
            if m:
                out.add(m.group(1))
    return out


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
    victim = None
    deadline = time.time() + 600
    logs = slurm / "smoke" / "logs" / "rollout"
    while victim is None and proc.poll() is None and time.time() < deadline:
        q = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"],
                           capture_output=True, text=True).stdout
        running = dict(reversed(line.split("|", 1)) for line in q.splitlines() if "|" in line)
        # a shard whose rollout command has started (log exists) but has not finished
        for logf in sorted(logs.rglob("*.log")) if logs.exists() else []:
            sid = logf.relative_to(logs).as_posix()[:-len(".log")]
            if (slurm / "smoke" / "traces" / sid / "SHA256SUMS").exists():
                continue
            model, defense, seed, stage, shard = sid.split("/")
            comment = (f"rule_rollout_wildcards_{model}_{defense}_{seed.split('=')[1]}_"
                       f"{stage}_{shard.split('-')[1]}")
            if comment in running:
                subprocess.run(["scancel", running[comment]], check=True)
                victim = sid
                print(f"  cancelled Slurm job {running[comment]} running shard {sid}",
                      flush=True)
                break
        time.sleep(0.3)
    rc1 = proc.wait()
    print(f"  run 1 ended with rc {rc1} after {time.perf_counter() - t0:.0f} s", flush=True)
    if victim is None:
        raise SystemExit("no running rollout job was seen to cancel")
    if rc1 == 0:
        raise SystemExit("run 1 should fail: a rollout job was cancelled")
    if (slurm / "smoke" / "traces" / victim / "SHA256SUMS").exists():
        raise SystemExit(f"cancelled shard {victim} looks finished")

    print("3. corrupt another finished shard", flush=True)
    done = sorted(p.parent for p in (slurm / "smoke" / "traces").rglob("SHA256SUMS"))
    target = next(d for d in done if d.relative_to(slurm / "smoke" / "traces").as_posix()
                  != victim)
    corrupt = target.relative_to(slurm / "smoke" / "traces").as_posix()
    p = target / "events.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    st = subprocess.run([str(BIN / "containmentbench"), "status", "smoke", "cluster=slurm_local",
                         f"results_dir={slurm}", COMMON, "++backend.options.latency_ms=300"],
                        cwd=ROOT, capture_output=True, text=True)
    print("  status: " + st.stdout.strip(), flush=True)

    print("4. rerun: only the two shards are redone", flush=True)
    t0 = time.perf_counter()
    log2 = WORK / "slurm-run2.log"
    run(snakemake_slurm(slurm, []), log2)
    t_rerun = time.perf_counter() - t0
    redone = rollout_jobs_in_log(log2.read_text())
    print(f"  rollout jobs in the rerun: {sorted(redone)}", flush=True)
    if redone != {victim, corrupt}:
        raise SystemExit(f"rerun redid {sorted(redone)}, expected {sorted({victim, corrupt})}")
    if not any((slurm / "smoke" / "quarantine").rglob("events.parquet")):
        raise SystemExit("the corrupt shard was not kept in quarantine")

    print("5. final tables byte-identical to the local run", flush=True)
    compared = 0
    for sub in ("tables", "figures", "metrics", "reparse"):
        for a in sorted((local / "smoke" / sub).rglob("*")):
            if a.is_dir() or a.suffix in (".png", ".pdf"):
                continue
            b = slurm / "smoke" / a.relative_to(local / "smoke")
            if not b.exists() or a.read_bytes() != b.read_bytes():
                raise SystemExit(f"differs from the local run: {a.relative_to(local)}")
            compared += 1
    run([str(BIN / "containmentbench"), "verify", str(slurm / "smoke")], WORK / "verify.log")
    print(f"slurm fault test passed: {compared} files identical; rerun {t_rerun:.0f} s; "
          f"total {time.perf_counter() - t_all:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
