"""Rollout-engine throughput, measured side by side in one run (issue: agents, "Speed").

1. full_main x none x seed 1 with the sim agent, in process: rollouts/s and harness time per
   step (model call), with the sim agent's own share reported separately.
2. AgentDojo's ground-truth pipeline (no LLM) on its workspace suite, per task and per step
   (with the ``agentdojo`` extra of this environment, else in ``.venv-agentdojo``), and the
   AgentDojo adapter's own cost per task against AgentDojo alone on the same tasks
   (``bench/agentdojo_adapter_overhead.py``; target: the adapter adds at most 20%).
3. All 17,640 full_main sim rollouts (7 defenses x 5 seeds, 140 shards, traces written to
   Parquet) on N worker processes (default 2).

Prints the figures and the ratios; no assertion on time (targets: harness >= 20x cheaper per
step than AgentDojo per task; 17,640 rollouts <= 60 s on 2 cores).

    python bench/rollout_throughput.py [--workers 2] [--skip-agentdojo]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ADJ_VENV = ROOT / ".venv-agentdojo"


def _sim_backend():
    from containmentbench.models.base import BackendConfig
    from containmentbench.models.sim import SimBackend

    return SimBackend(BackendConfig("sim", "sim", options={"profile": "default"}))


def _run_shard(spec: tuple[str, int, str, str]) -> tuple[int, int]:
    defense, seed, stage, out = spec
    from containmentbench.policies import load_policy
    from containmentbench.runtime.driver import ShardContext, run_episodes, shard_tables
    from containmentbench.runtime.episode import RuntimeConfig
    from containmentbench.scenarios.manifest import load_suite
    from containmentbench.trace.io import write_shard

    scen = load_suite("full_main", stage)
    pol = load_policy(defense)
    backend = _sim_backend()
    ctx = ShardContext("bench", "sim:default", "sim", defense, seed, "default")
    eps, wall, model_s = run_episodes(scen, pol, backend, ctx, RuntimeConfig(), 1024)
    write_shard(out, shard_tables(eps, ctx, pol, True, wall, model_s))
    return len(eps), sum(e.counts["model_calls"] for e in eps)


def single(seed: int = 1) -> dict:
    from containmentbench.policies import load_policy
    from containmentbench.runtime.driver import ShardContext, run_episodes
    from containmentbench.runtime.episode import RuntimeConfig
    from containmentbench.scenarios.manifest import load_suite

    scen = load_suite("full_main")
    pol = load_policy("none")
    backend = _sim_backend()
    ctx = ShardContext("bench", "sim:default", "sim", "none", seed, "default")
    run_episodes(scen[:20], pol, backend, ctx, RuntimeConfig())  # warm-up
    t0 = time.perf_counter()
    eps, _, model_s = run_episodes(scen, pol, backend, ctx, RuntimeConfig(), 1024)
    dt = time.perf_counter() - t0
    steps = sum(e.counts["model_calls"] for e in eps)
    sim_s = sum(model_s)
    return {"rollouts": len(eps), "steps": steps, "seconds": dt,
            "rollouts_per_s": len(eps) / dt, "harness_s_per_step": (dt - sim_s) / steps,
            "total_s_per_step": dt / steps, "sim_agent_s_per_step": sim_s / steps}


def agentdojo() -> dict | None:
    import importlib.util

    # the `agentdojo` extra installed in this environment (make deps), else a separate venv
    py = Path(sys.executable) if importlib.util.find_spec("agentdojo") is not None \
        else ADJ_VENV / "bin" / "python"
    if not py.exists():
        print("creating .venv-agentdojo (pip install agentdojo) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(ADJ_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "agentdojo==0.1.35"], check=True)
    out = subprocess.run([str(py), str(ROOT / "bench" / "agentdojo_gt.py")], check=True,
                         capture_output=True, text=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def full(workers: int) -> dict:
    from containmentbench.config.compose import load_study
    from containmentbench.pipeline.plan import shards

    data = load_study(["study=full_main"])
    with tempfile.TemporaryDirectory(prefix="cb-bench-") as tmp:
        specs = [(s.defense, s.seed, s.stage, os.path.join(tmp, s.id)) for s in shards(data)]
        t0 = time.perf_counter()
        with ProcessPoolExecutor(workers) as pool:
            res = list(pool.map(_run_shard, specs, chunksize=1))
        dt = time.perf_counter() - t0
    return {"shards": len(specs), "rollouts": sum(r[0] for r in res),
            "steps": sum(r[1] for r in res), "seconds": dt, "workers": workers}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-agentdojo", action="store_true")
    args = ap.parse_args()
    s = single()
    print(f"[sim agent: harness validation] full_main x none x seed 1: {s['rollouts']} "
          f"rollouts, {s['steps']} steps in {s['seconds']:.2f} s = {s['rollouts_per_s']:.0f} "
          f"rollouts/s; harness {1e3 * s['harness_s_per_step']:.3f} ms/step (sim agent "
          f"{1e3 * s['sim_agent_s_per_step']:.3f} ms/step)")
    if not args.skip_agentdojo:
        a = agentdojo()
        per_step = a["total_s"] / a["total_steps"]
        print(f"AgentDojo ground-truth pipeline, workspace: {a['tasks']} tasks, "
              f"{1e3 * a['mean_s']:.1f} ms/task, {a['steps_mean']:.1f} steps/task, "
              f"{1e3 * per_step:.1f} ms/step")
        print(f"ratio AgentDojo per task / ContainmentBench harness per step: "
              f"{a['mean_s'] / s['harness_s_per_step']:.0f}x (target >= 20x); per step vs per "
              f"step: {per_step / s['harness_s_per_step']:.0f}x; per task vs per rollout: "
              f"{a['mean_s'] / (s['seconds'] / s['rollouts']):.0f}x")
        import importlib.util

        if importlib.util.find_spec("agentdojo") is None:
            print("AgentDojo adapter: extra `agentdojo` not installed here; skipped")
        else:
            from bench.agentdojo_adapter_overhead import measure

            m = measure(["banking", "slack"], pairs_per_task=2, repeat=2, echo=False)
            print(f"AgentDojo adapter on the same tasks ({m['tasks']} banking+slack tasks, "
                  f"ground truth): adapter/AgentDojo-alone cost ratio none "
                  f"{m['none'] / m['native']:.3f}x, intent_ledger_v2 "
                  f"{m['intent_ledger_v2'] / m['native']:.3f}x (target <= 1.20x; all suites: "
                  f"bench/agentdojo_adapter_overhead.py)")
    f = full(args.workers)
    print(f"[sim agent: harness validation] all full_main rollouts: {f['rollouts']} rollouts "
          f"({f['shards']} shards, traces written) in {f['seconds']:.1f} s on {f['workers']} "
          f"workers = {f['rollouts'] / f['seconds']:.0f} rollouts/s; target 60 s -> ratio "
          f"{60 / f['seconds']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
