"""Analysis speed and scale, measured in one run (issue: measurement, "Speed and scale").

1. The whole analysis of a full_main metrics table (17,640 rollouts, 7 defenses): intervals
   computed x 10,000 resamples, wall time (target <= 15 s on 2 cores).
2. 1,000,000 synthetic rollout-metric rows (the metrics schema, study-shaped distributions):
   metrics aggregation (stage x defense means over a lazy Parquet scan) and the full analysis,
   wall time, CPU time and peak RSS (parent, and the largest bootstrap worker) in a child
   process (targets <= 45 s and <= 2 GiB on 2 cores; ``--compare-one-worker`` runs the same
   analysis on one worker beside it and prints the ratio).

    python bench/analysis_speed.py [--metrics results/full_main/metrics/rollout_metrics.parquet]
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
    # columns the schema gained after this generator was written: all null
    df = df.with_columns(pl.Series(f.name, pa.nulls(n, f.type)) for f in METRICS
                         if f.name not in df.columns)
    table = df.select(METRICS.names).to_arrow().cast(METRICS)
    import pyarrow.parquet as pq
    pq.write_table(table, path, compression="zstd")


def child(path: str, out: str, workers: int | None = None) -> None:
    """Aggregation (lazy scan) and the full analysis of one metrics file; prints JSON."""
    import polars as pl

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
    t1 = time.perf_counter()
    c1 = time.process_time()
    info = analyze(path, out, load_option("analysis", "default"), workers=workers)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2  # KiB -> GiB
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_peak = kids.ru_maxrss / 1024 ** 2
    cpu = time.process_time() - c1 + kids.ru_utime + kids.ru_stime
    print(json.dumps({"aggregate_s": t_agg, "groups": agg.height,
                      "analysis_s": time.perf_counter() - t1, "intervals": info["intervals"],
                      "peak_gib": peak, "worker_peak_gib": worker_peak, "cpu_s": cpu}))


def measure(path: Path, out: Path, workers: int | None = None) -> dict:
    extra = ["--workers", str(workers)] if workers else []
    res = subprocess.run([sys.executable, __file__, "--child", str(path), str(out), *extra],
                         check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--metrics", default=str(ROOT / "results" / "full_main" / "metrics" /
                                             "rollout_metrics.parquet"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--workers", type=int, default=None,
                    help="analysis worker processes (default: available cores)")
    ap.add_argument("--compare-one-worker", action="store_true",
                    help="also run the 1M-row analysis on one worker, side by side")
    args = ap.parse_args()
    if args.child:
        child(*args.child, workers=args.workers)
        return 0
    with tempfile.TemporaryDirectory(prefix="cb-bench-an-") as tmp:
        if Path(args.metrics).exists():
            r = measure(Path(args.metrics), Path(tmp) / "fm")
            print(f"[sim agent: harness validation] full_main analysis: {r['intervals']} "
                  f"intervals x 10,000 resamples in {r['analysis_s']:.1f} s (target 15 s -> "
                  f"{15 / r['analysis_s']:.1f}x headroom); peak {r['peak_gib']:.2f} GiB")
        else:
            print(f"(no {args.metrics}: run `make run` first for the full_main figure)")
        p = Path(tmp) / "synthetic.parquet"
        t0 = time.perf_counter()
        synthetic(args.rows, p)
        gen = time.perf_counter() - t0
        runs = {"all cores": measure(p, Path(tmp) / "syn", args.workers)}
        if args.compare_one_worker:
            runs["one worker"] = measure(p, Path(tmp) / "syn1", 1)
        for name, r in runs.items():
            total = r["aggregate_s"] + r["analysis_s"]
            print(f"{args.rows:,} synthetic metric rows (generated in {gen:.1f} s), {name}: "
                  f"aggregation {r['aggregate_s']:.2f} s (lazy scan), analysis "
                  f"{r['analysis_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, {r['intervals']} "
                  f"intervals; total {total:.1f} s (target 45 s -> {45 / total:.2f}x); peak "
                  f"{r['peak_gib']:.2f} GiB + worker {r['worker_peak_gib']:.2f} GiB "
                  f"(target 2 GiB)")
        if len(runs) == 2:
            one, two = runs["one worker"], runs["all cores"]
            print(f"ratio one worker / all cores, analysis wall: "
                  f"{one['analysis_s'] / two['analysis_s']:.2f}x "
                  f"(load average {__import__('os').getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
