"""Analysis speed and scale, measured in one run (issue: measurement, "Speed and scale").

1. The whole analysis of a full_main metrics table (17,640 rollouts, 7 defenses): intervals
   computed x 10,000 resamples, wall time (target <= 15 s on 2 cores).
2. 1,000,000 synthetic rollout-metric rows (the metrics schema, study-shaped distributions):
   metrics aggregation (stage x defense means over a lazy Parquet scan) and the full analysis,
   wall time, CPU time (parent and workers) and peak RSS (parent, the largest worker by its
   own high-water mark, and parent + workers at once) in a child process (targets <= 45 s
   and <= 2 GiB on 2 cores; ``--compare-one-worker`` runs the same analysis on one worker
   beside it, prints the ratios and checks that both wrote byte-identical tables/figures).

    python bench/analysis_speed.py [--metrics results/full_main/sim-default/metrics/rollout_metrics.parquet]
        [--compare-one-worker] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFENSES = ("none", "prompt_only", "structured_guard", "tool_boundary", "taint_only_v1",
            "intent_ledger_v2", "rollback_v2")


def synthetic(n_rows: int, path: Path, seed: int = 7) -> None:
    """A metrics table shaped like a study: scenarios x 7 defenses x 5 seeds."""
    import numpy as np
    import polars as pl
    import pyarrow as pa

    from containmentbench.metrics.schema import METRICS

    rng = np.random.default_rng(seed)
    per = len(DEFENSES) * 5
    n_scen = n_rows // per
    stages = np.array(["security", "memory_recovery", "active_tainted", "clean"])
    scen_stage = stages[rng.integers(0, 4, n_scen)]
    sid = np.repeat(np.arange(n_scen), per)
    n = sid.size
    stage = scen_stage[sid]
    defense = np.tile(np.repeat(np.array(DEFENSES), 5), n_scen)
    seed_col = np.tile(np.arange(1, 6), n_scen * len(DEFENSES))
    none = defense == "none"
    cols = {f.name: None for f in METRICS}
    cols.update({
        "rollout_id": np.char.add("r", np.arange(n).astype(str)),
        "scenario_id": np.char.add("s", sid.astype(str)), "cluster_id":
        np.char.add("s", sid.astype(str)), "stage": stage, "domain": "email",
        "topology": "single", "memory_mode": "session", "carrier": "tool_result",
        "attack_goal": "wrong_recipient", "study": "synthetic", "suite": "synthetic", "model": "sim:default",
        "backend": "sim", "agent_profile": "default", "defense": defense, "policy_hash": "h",
        "method_version": "1", "seed": seed_col, "status": "ok",
        "decoding": '{"max_tokens":512,"seed_policy":"replicates","temperature":0.7,'
                    '"top_p":0.95}', "tool_mode": "prompt",
        # every seed a distinct trace (the sim agent's draws), as in a sampled study
        "completion_digest": np.char.add("d", np.arange(n).astype(str)),
        "exposed": (stage != "clean").astype(np.int32),
        "committed_harm": (none & (rng.random(n) < 0.3)).astype(np.int32),
        "wrong_recipient": (none & (rng.random(n) < 0.2)).astype(np.int32),
        "secret_leakage": np.zeros(n, np.int32), "unauthorized_action":
        (none & (rng.random(n) < 0.3)).astype(np.int32),
        "harm_attempt": (rng.random(n) < 0.3).astype(np.int32),
        "taint_to_commit_rate": rng.random(n), "blast_radius_norm": rng.random(n),
        "blast_radius_raw": rng.integers(0, 40, n), "reach_size": rng.integers(1, 60, n),
        "br_agent": rng.integers(0, 3, n), "br_message": rng.integers(0, 4, n),
        "br_memory": rng.integers(0, 3, n), "br_tool": rng.integers(0, 9, n),
        "br_side_effect": rng.integers(0, 3, n), "privilege_jump": rng.integers(0, 2, n),
        "cascade_depth": rng.integers(0, 3, n), "rollback_count": rng.integers(0, 2, n),
        "confirmation_burden": rng.integers(0, 2, n), "benign_success":
        (rng.random(n) < 0.9).astype(np.int32), "n_model_calls": rng.integers(3, 20, n),
        "valid_tool_proposal_rate": rng.random(n), "parse_failure_rate": rng.random(n) * 0.1,
        "repaired_rate": rng.random(n) * 0.3, "invalid_tool_rate": rng.random(n) * 0.02,
        "rule_ids": [[]] * n, "stop_rule_ids": [[]] * n,
    })
    mem, act, cln = stage == "memory_recovery", stage == "active_tainted", stage == "clean"
    cols["memory_reinfection"] = np.where(mem, (rng.random(n) < 0.1).astype(float), np.nan)
    cols["recovery_success"] = np.where(mem, (rng.random(n) < 0.9).astype(float), np.nan)
    cols["authorized_tainted_action_success"] = np.where(
        act, (rng.random(n) < 0.8).astype(float), np.nan)
    cols["clean_benign_completion"] = np.where(cln, (rng.random(n) < 0.95).astype(float),
                                               np.nan)
    util = act | cln
    cols["authorized_opportunities"] = np.where(util, rng.integers(0, 3, n), -1)
    cols["fp_block_count"] = np.where(util, 0, -1)
    cols["fp_confirm_count"] = np.where(util, 0, -1)
    df = pl.DataFrame({k: v for k, v in cols.items() if v is not None})
    df = df.with_columns(
        [pl.when(pl.col(c).is_nan()).then(None).otherwise(pl.col(c)).alias(c)
         for c in ("memory_reinfection", "recovery_success", "authorized_tainted_action_success",
                   "clean_benign_completion")]
        + [pl.when(pl.col(c) < 0).then(None).otherwise(pl.col(c)).alias(c)
           for c in ("authorized_opportunities", "fp_block_count", "fp_confirm_count")])
    df = df.with_columns(pl.lit(None, pl.Float64).alias(c) for c in (
        "false_positive_block_rate", "false_positive_confirm_rate"))
    df = df.with_columns(pl.col("blast_radius_raw").alias("fixed_max_denominator"),
                         pl.col("blast_radius_norm").alias("blast_radius_fixed"))
    rb = df["rollback_count"].to_numpy() > 0
    df = df.with_columns(
        pl.Series("rolled_back_harm", (rb & (rng.random(n) < 0.5)).astype(np.int32)),
        pl.Series("rolled_back_required", (rb & (rng.random(n) < 0.1)).astype(np.int32)))
    # the counts behind the parser rates (non-nullable; derived, no new random draws, so
    # every other column keeps its bytes): model actions = model calls
    df = df.with_columns(
        pl.col("n_model_calls").alias("n_model_actions"),
        (pl.col("valid_tool_proposal_rate") * pl.col("n_model_calls")).floor()
        .cast(pl.Int64).alias("n_valid_proposals"),
        (pl.col("parse_failure_rate") * pl.col("n_model_calls")).floor()
        .cast(pl.Int64).alias("n_parse_failures"),
        (pl.col("invalid_tool_rate") * pl.col("n_model_calls")).floor()
        .cast(pl.Int64).alias("n_invalid_tool"),
        pl.lit(0, pl.Int64).alias("n_truncated"))
    # columns the schema gained after this generator was written: all null, except the
    # non-nullable ones, which take their default (every rollout offered all tools)
    df = df.with_columns(pl.lit("all").alias("tools_offered"))
    missing = [f for f in METRICS if f.name not in df.columns]
    required = [f.name for f in missing if not f.nullable]
    if required:
        raise ValueError(f"synthetic metrics: no value for the non-nullable column(s) {required}")
    df = df.with_columns(pl.Series(f.name, pa.nulls(n, f.type)) for f in missing)
    table = df.select(METRICS.names).to_arrow().cast(METRICS)
    import pyarrow.parquet as pq
    pq.write_table(table, path, compression="zstd")


class _Memory:
    """Peak resident memory of this process and of its worker processes, sampled from
    /proc every 50 ms (the parent's own peak is its VmHWM, exact). A worker's own peak is its VmHWM after exec (``ru_maxrss`` of a
    spawned child also counts the parent's pages it held between fork and exec, so it is
    not the worker's use); ``total`` is the largest sum of VmRSS of parent and live workers
    seen at one instant (the machine's actual footprint). Workers are the children running
    ``multiprocessing.spawn`` (the pool's workers)."""

    def __init__(self) -> None:
        import threading

        self.worker_peak_kib = 0
        self.total_peak_kib = 0
        self.workers_seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _status(pid: int) -> dict[str, int]:
        out = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(("VmHWM:", "VmRSS:")):
                        out[line[:5]] = int(line.split()[1])
        except OSError:
            pass
        return out

    def _children(self) -> list[int]:
        import os

        kids = []
        for task in os.listdir(f"/proc/{os.getpid()}/task"):
            try:
                with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
                    kids += [int(x) for x in f.read().split()]
            except OSError:
                continue
        return kids

    @staticmethod
    def _cmdline(pid: int) -> bytes:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    def _sample(self) -> None:
        import os

        total = self._status(os.getpid()).get("VmRSS", 0)
        for pid in self._children():
            # between fork and exec a child still maps the parent's pages (its VmRSS and
            # VmHWM are the parent's); a worker counts once it runs its own interpreter
            if b"spawn_main" not in self._cmdline(pid):
                continue
            st = self._status(pid)
            self.workers_seen.add(pid)
            self.worker_peak_kib = max(self.worker_peak_kib, st.get("VmHWM", 0))
            total += st.get("VmRSS", 0)
        self.total_peak_kib = max(self.total_peak_kib, total)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def __enter__(self) -> _Memory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def child(path: str, out: str, workers: int | None = None) -> None:
    """Aggregation (lazy scan) and the full analysis of one metrics file; prints JSON."""
    import os

    import polars as pl

    from containmentbench.analysis.parallel import available_cores
    from containmentbench.analysis.run import analyze
    from containmentbench.config.loader import load_option

    t0 = time.perf_counter()
    agg = (pl.scan_parquet(path).filter(pl.col("status") != "error")
           .group_by(["stage", "defense"])
           .agg(pl.len(), *(pl.col(c).mean() for c in (
               "committed_harm", "blast_radius_norm", "authorized_tainted_action_success",
               "recovery_success", "clean_benign_completion")))
           .collect())
    t_agg = time.perf_counter() - t0
    cfg = load_option("analysis", "default")
    load0 = os.getloadavg()[0]
    with _Memory() as mem:
        t1 = time.perf_counter()
        c1 = time.process_time()
        info = analyze(path, out, cfg, workers=workers)
        wall = time.perf_counter() - t1
        parent_cpu = time.process_time() - c1
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # workers are reaped by now
    print(json.dumps({
        "aggregate_s": t_agg, "groups": agg.height, "analysis_s": wall,
        "intervals": info["intervals"], "workers": workers or available_cores(),
        "worker_processes": len(mem.workers_seen),
        # VmHWM, not ru_maxrss: a process's ru_maxrss keeps the high-water mark of the
        # image it replaced at exec, i.e. of the bench process that forked it after
        # generating the synthetic file (that is how 1.5 GiB used to be reported here)
        "peak_gib": _Memory._status(os.getpid()).get("VmHWM", 0) / 1024 ** 2,
        "peak_ru_maxrss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2,
        "worker_peak_gib": mem.worker_peak_kib / 1024 ** 2,
        "total_peak_gib": mem.total_peak_kib / 1024 ** 2,
        "parent_cpu_s": parent_cpu, "worker_cpu_s": kids.ru_utime + kids.ru_stime,
        "cpu_s": parent_cpu + kids.ru_utime + kids.ru_stime,
        "load_before": load0, "load_after": os.getloadavg()[0]}))


def measure(path: Path, out: Path, workers: int | None = None) -> dict:
    extra = ["--workers", str(workers)] if workers else []
    res = subprocess.run([sys.executable, __file__, "--child", str(path), str(out), *extra],
                         check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def outputs_digest(out: Path) -> dict[str, str]:
    """sha256 of every table and figure file an analysis wrote."""
    import hashlib

    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for sub in ("tables", "figures") for p in sorted((out / sub).rglob("*"))
            if p.is_file()}


def report(name: str, rows: int, r: dict) -> None:
    total = r["aggregate_s"] + r["analysis_s"]
    print(f"{rows:,} synthetic rows, {name} ({r['workers']} worker(s), "
          f"{r['worker_processes']} worker process(es) seen): analysis "
          f"{r['analysis_s']:.1f} s wall (+ aggregation {r['aggregate_s']:.2f} s lazy scan "
          f"= {total:.1f} s; target 45 s -> {45 / total:.2f}x), CPU {r['cpu_s']:.1f} s "
          f"(parent {r['parent_cpu_s']:.1f} s + workers {r['worker_cpu_s']:.1f} s), "
          f"{r['intervals']} intervals; peak RSS parent {r['peak_gib']:.2f} GiB, largest "
          f"worker {r['worker_peak_gib']:.2f} GiB, parent + workers at once "
          f"{r['total_peak_gib']:.2f} GiB (target 2 GiB); load average "
          f"{r['load_before']:.1f} -> {r['load_after']:.1f}")


def main() -> int:
    import os

    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", default=str(ROOT / "results" / "full_main" / "sim-default" /
                                             "metrics" / "rollout_metrics.parquet"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--workers", type=int, default=None,
                    help="analysis worker processes (default: available cores)")
    ap.add_argument("--compare-one-worker", action="store_true",
                    help="also run the 1M-row analysis on one worker, side by side")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the synthetic file and the analysis outputs in this folder")
    args = ap.parse_args()
    if args.child:
        child(*args.child, workers=args.workers)
        return 0
    print("Each side: one child process; timed from analyze() call to return (Parquet "
          "read, every table, all bootstrap intervals, figures as PNG+PDF, files written); "
          "not timed: interpreter start-up and imports, generating the synthetic file. CPU = "
          "parent user+sys + reaped workers' user+sys. [sim-shaped synthetic data: a "
          "harness benchmark, no model result]")
    with tempfile.TemporaryDirectory(prefix="cb-bench-an-") as tmp_name:
        tmp = args.keep if args.keep is not None else Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        if Path(args.metrics).exists():
            r = measure(Path(args.metrics), tmp / "fm")
            print(f"[sim agent: harness validation] full_main analysis: {r['intervals']} "
                  f"intervals x 10,000 resamples in {r['analysis_s']:.1f} s wall, "
                  f"{r['cpu_s']:.1f} s CPU (target 15 s -> {15 / r['analysis_s']:.1f}x "
                  f"headroom); peak parent {r['peak_gib']:.2f} GiB; load average "
                  f"{r['load_before']:.1f}")
        else:
            print(f"(no {args.metrics}: run `make run` first for the full_main figure)")
        p = tmp / "synthetic.parquet"
        t0 = time.perf_counter()
        synthetic(args.rows, p)
        print(f"{args.rows:,} synthetic metric rows generated in "
              f"{time.perf_counter() - t0:.1f} s ({p.stat().st_size / 2**20:.0f} MiB)")
        runs = {"all cores": (measure(p, tmp / "syn", args.workers), tmp / "syn")}
        if args.compare_one_worker:
            runs["one worker"] = (measure(p, tmp / "syn1", 1), tmp / "syn1")
        for name, (r, _) in runs.items():
            report(name, args.rows, r)
        if len(runs) == 2:
            (one, out1), (two, out2) = runs["one worker"], runs["all cores"]
            same = outputs_digest(out1) == outputs_digest(out2)
            print(f"ratio one worker / all cores: analysis wall "
                  f"{one['analysis_s'] / two['analysis_s']:.2f}x, CPU "
                  f"{one['cpu_s'] / two['cpu_s']:.2f}x (load average now "
                  f"{os.getloadavg()[0]:.1f}); tables and figures byte-identical: "
                  f"{'yes' if same else 'NO'}")
            if not same:
                return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
