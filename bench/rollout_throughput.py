"""Rollout cost against AgentDojo, like for like, measured side by side in one run.

What each figure includes (CPU seconds, user + sys, so a loaded machine inflates it less than
wall time; wall time is printed beside it):

A. AgentDojo, per task: its ground-truth pipeline (no LLM) on the workspace suite, one task
   = environment load + injection + every ground-truth tool call + utility check, timed
   inside one warm process (``bench/agentdojo_gt.py`` in ``.venv-agentdojo``, created from
   PyPI on first use). Start-up of that process is NOT included.
B. ContainmentBench, per rollout WITH trace output, in one warm process: full_main x one
   defense x one seed (504 rollouts): episodes with the sim agent, the trace tables built and
   each stage's shard written to Parquet with checksums. Start-up NOT included (like A).
C. ContainmentBench, per rollout as ``make run`` pays for it: every rollout job of full_main
   (7 defenses x 5 seeds, 17,640 rollouts) run through the CLI exactly as the Snakemake rule
   does (``containmentbench rollout --study-config ... --job ...``), two jobs at a time as
   ``--cores 2`` runs them; the CPU of those processes (interpreter start-up, imports, plan,
   scenario load, episodes, trace writing) over the rollouts they wrote.
D. Per step (model call), for reference only (not like for like: an AgentDojo task is 2.1
   steps, a rollout 7.3): A per step against B per step.

Ratios A/B and A/C are printed (targets: A/C >= 50x).

    python bench/rollout_throughput.py [--workers 2] [--skip-agentdojo] [--skip-make-run]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ADJ_VENV = ROOT / ".venv-agentdojo"


def agentdojo() -> dict:
    py = ADJ_VENV / "bin" / "python"
    if not py.exists():
        print("creating .venv-agentdojo (pip install agentdojo) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(ADJ_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "agentdojo"], check=True)
    out = subprocess.run([str(py), str(ROOT / "bench" / "agentdojo_gt.py")], check=True,
                         capture_output=True, text=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def in_process(defense: str = "none", seed: int = 1) -> dict:
    """B: one warm process, rollouts with their traces written."""
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig
    from containmentbench.models.sim import SimBackend
    from containmentbench.runtime.driver import ShardContext, run_episodes, shard_tables
    from containmentbench.runtime.episode import RuntimeConfig
    from containmentbench.scenarios.manifest import load_suite
    from containmentbench.trace.io import write_shard

    backend = SimBackend(BackendConfig("sim", "sim", options={"profile": "default"}))
    pol = load_defense(defense)
    ctx = ShardContext("bench", "sim:default", "sim", defense, seed, "default")
    scen = load_suite("full_main")
    with tempfile.TemporaryDirectory(prefix="cb-bench-") as tmp:
        eps, wall, model_s = run_episodes(scen[:20], pol, backend, ctx, RuntimeConfig())
        write_shard(Path(tmp) / "warm", shard_tables(eps, ctx, pol, True, wall, model_s))
        t0, c0 = time.perf_counter(), time.process_time()
        n = steps = sim_s = 0
        for stage in ("security", "memory_recovery", "active_tainted", "clean"):
            part = [s for s in scen if s.stage == stage]
            eps, wall, model_s = run_episodes(part, pol, backend, ctx, RuntimeConfig(), 1024)
            write_shard(Path(tmp) / stage, shard_tables(eps, ctx, pol, True, wall, model_s))
            n += len(eps)
            steps += sum(e.counts["model_calls"] for e in eps)
            sim_s += sum(model_s)
        cpu, dt = time.process_time() - c0, time.perf_counter() - t0
    return {"rollouts": n, "steps": steps, "cpu_s": cpu, "wall_s": dt, "sim_agent_s": sim_s}


def make_run_rollouts(workers: int) -> dict:
    """C: every rollout job of full_main through the CLI, ``workers`` at a time."""
    from containmentbench.config.compose import load_study, save_resolved
    from containmentbench.pipeline.plan import jobs, run_dir

    with tempfile.TemporaryDirectory(prefix="cb-bench-run-") as tmp:
        data = load_study(["study=full_main", f"results_dir={tmp}"])
        cfg = run_dir(data) / "config.yaml"
        save_resolved(data, cfg)
        names = [j.name for j in jobs(data)]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        exe = Path(sys.executable).with_name("containmentbench")

        def one(name: str) -> None:
            subprocess.run([str(exe), "rollout", "--study-config", str(cfg), "--job", name,
                            "--quiet"], check=True, env=env, cwd=tmp, capture_output=True)

        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, names))
        dt = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        import pyarrow.parquet as pq
        n = sum(pq.read_metadata(p).num_rows
                for p in (run_dir(data) / "traces").rglob("rollouts.parquet"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"jobs": len(names), "rollouts": n, "cpu_s": cpu, "wall_s": dt, "workers": workers}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-agentdojo", action="store_true")
    ap.add_argument("--skip-make-run", action="store_true")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
          f"[sim agent: harness validation, not a model result]")
    b = in_process()
    b_roll = b["cpu_s"] / b["rollouts"]
    print(f"B  ContainmentBench in one warm process, traces written: {b['rollouts']} rollouts, "
          f"{b['steps']} steps, {b['cpu_s']:.2f} s CPU ({b['wall_s']:.2f} s wall) = "
          f"{1e3 * b_roll:.2f} ms CPU/rollout, {1e3 * b['cpu_s'] / b['steps']:.3f} ms/step "
          f"(sim agent itself {1e3 * b['sim_agent_s'] / b['steps']:.3f} ms/step wall)")
    c = None
    if not args.skip_make_run:
        c = make_run_rollouts(args.workers)
        c_roll = c["cpu_s"] / c["rollouts"]
        print(f"C  ContainmentBench as `make run` pays: {c['jobs']} rollout jobs via the CLI, "
              f"{c['workers']} at a time: {c['rollouts']} rollouts, {c['cpu_s']:.1f} s CPU "
              f"({c['wall_s']:.1f} s wall) = {1e3 * c_roll:.2f} ms CPU/rollout, start-up "
              f"included")
    if not args.skip_agentdojo:
        a = agentdojo()
        a_cpu = a.get("cpu_mean_s", a["mean_s"])
        print(f"A  AgentDojo ground-truth pipeline, workspace: {a['tasks']} tasks, "
              f"{1e3 * a_cpu:.1f} ms CPU/task ({1e3 * a['mean_s']:.1f} ms wall), "
              f"{a['steps_mean']:.1f} steps/task, warm process, start-up not included")
        print(f"ratio A/B  AgentDojo per task / our rollout with traces (both warm): "
              f"{a_cpu / b_roll:.0f}x")
        if c is not None:
            print(f"ratio A/C  AgentDojo per task / our rollout as `make run` pays (start-up "
                  f"included on our side only): {a_cpu / c_roll:.0f}x (target >= 50x)")
        a_step = a_cpu * a["tasks"] / a["total_steps"]
        print(f"ratio D    per step / per step (reference, not like for like): "
              f"{a_step / (b['cpu_s'] / b['steps']):.0f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
