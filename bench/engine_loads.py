"""Engine loads per study and the share of job time spent loading, side by side in one run.

1. The plan: for full_main (504 scenarios x 7 defenses x 5 seeds), shards and rollout jobs
   (= backend loads) for every ``cluster.rollout_group``.
2. A real engine: the tiny random-weight Qwen2 model of the tests on the ``hf`` backend (CPU),
   one seed x 2 defenses x the four stages of the smoke suite (8 shards), run once as one job (``rollout_group=seed``: one load) and once as one job per
   shard (``rollout_group=shard``): loads, load seconds, wall seconds and load share of each,
   and the ratio of wall times. The traces of both runs are compared byte for byte.

No assertion on time (target: at most one engine load per GPU job).

    python bench/engine_loads.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from containmentbench.config.compose import load_study  # noqa: E402
from containmentbench.pipeline.plan import ROLLOUT_GROUPS, jobs, shard_dir, shards  # noqa: E402
from containmentbench.runtime.job import run_job  # noqa: E402


def plan_table() -> None:
    print("1. full_main plan: rollout jobs (= engine loads) per grouping")
    for group in ROLLOUT_GROUPS:
        data = load_study(["study=full_main", f"cluster.rollout_group={group}"])
        sh = shards(data)
        print(f"   rollout_group={group:13s} shards {len(sh):4d}  jobs/engine loads "
              f"{len(jobs(data, sh)):4d}")


def real_engine(tmp: Path) -> None:
    from tests.models.tiny_model import build_tiny_model

    model = tmp / "tiny"
    build_tiny_model(str(model))
    base = ["study=smoke", "study.seeds=[1]", "study.defenses=[none,tool_boundary]",
            "backend=hf", "model=qwen2_5_7b_instruct", "model.name=tiny_qwen2",
            f"model.path={model}", "model.max_model_len=4096", "model.dtype=float32",
            "backend.options.device=cpu", "backend.options.dtype=float32",
            "decoding.max_tokens=24"]
    print("2. hf backend, tiny Qwen2 on the CPU: 8 shards (16 scenarios x 2 defenses, seed 1)")
    out = {}
    for group in ("seed", "shard"):
        data = load_study([*base, f"results_dir={tmp / group}", f"cluster.rollout_group={group}"])
        t0 = time.perf_counter()
        loads = load_s = 0.0
        for job in jobs(data):
            res = run_job(data, job, quiet=True)
            loads += res.loads
            load_s += res.load_s
        wall = time.perf_counter() - t0
        out[group] = (data, wall)
        print(f"   rollout_group={group:6s} jobs {len(jobs(data)):2d}  engine loads {int(loads):2d}"
              f"  load {load_s:6.2f} s of {wall:6.2f} s  (load share {100 * load_s / wall:5.1f}%)")
    (a, wa), (b, wb) = out["seed"], out["shard"]
    same = all((shard_dir(a, s) / f).read_bytes() == (shard_dir(b, s) / f).read_bytes()
               for s in shards(a) for f in ("rollouts.parquet", "events.parquet",
                                             "edges.parquet"))
    print(f"   wall time, one job per shard / one job per seed: {wb / wa:.2f}x; "
          f"traces byte-identical: {same}")


def main() -> int:
    plan_table()
    with tempfile.TemporaryDirectory(prefix="cb-engine-loads-") as tmp:
        real_engine(Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
