"""``audit suite run``: the labelled suite rolled out into a run folder outside the pipeline.

The study ``taintbench`` (``config/study/taintbench.yaml``) composed with the given overrides
(``study.models=[...]``, ``backend=...``, ``decoding=...``) is rolled out for seeds 1..N with
the configured backend, exactly as a rollout job would (same runtime config, same per-request
seeds), into ``<out>/traces/<model>/none/seed=<s>/<stage>/shard-000``, beside the resolved
``config.yaml`` the audit's replays read. Any backend works; whether its rollouts can be
replayed is decided when the audit replays them (a baseline replay must reproduce each
trace). The pipeline's ``snakemake --config study=taintbench`` is the frozen, reproduced
route; this verb is for quick checks and other agents (``--every``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError


def roll_out(out: Path, overrides: Sequence[str], runs: int, every: int = 1,
             log: Any = sys.stderr) -> Path:
    """Roll the suite out into ``out`` (a new folder); returns it."""
    from containmentbench.config.compose import save_resolved
    from containmentbench.defense.loading import load_defense
    from containmentbench.integrity import writer
    from containmentbench.models.base import make_backend
    from containmentbench.pipeline.plan import model_slug
    from containmentbench.pipeline.runs import load_runs
    from containmentbench.runtime.driver import ShardContext, run_episodes, shard_tables
    from containmentbench.runtime.job import backend_config, runtime_config
    from containmentbench.scenarios.manifest import load_suite
    from containmentbench.trace.io import write_shard

    runs_cfg = load_runs(["study=taintbench", *overrides])
    if len(runs_cfg) != 1:
        raise BenchError("one model per suite run (give study.models=[one])",
                         field="study.models")
    data = runs_cfg[0]
    data["study"]["seeds"] = list(range(1, runs + 1))
    writer.check_out(out, "run", False)
    if (out / "traces").exists():
        raise BenchError("already holds suite traces (choose a new --out)",
                         file=str(out / "traces"), field="out")
    writer.ensure_dir(out, "run")
    save_resolved(data, out / "config.yaml")
    slug = model_slug(data)
    cfg = runtime_config(data)
    backend = make_backend(backend_config(data))
    pol = load_defense("none", data["defenses"])
    profile = data["model"]["sim_profile"] if data["backend"]["name"] == "sim" else None
    model = data["model"]["path"] or data["model"]["name"]
    label = f"sim:{profile}" if profile else model
    try:
        for seed in data["study"]["seeds"]:
            for stage in data["study"]["stages"]:
                scen = load_suite(data["study"]["suite"], stage)[::every]
                ctx = ShardContext(data["study"]["name"], label, data["backend"]["name"],
                                   "none", seed, profile)
                eps, wall, model_s = run_episodes(scen, pol, backend, ctx, cfg,
                                                  window=data["backend"]["window"])
                done = [e for e in eps if e is not None]
                tables = shard_tables(done, ctx, pol, backend.seed_supported, wall, model_s)
                write_shard(out / "traces" / slug / "none" / f"seed={seed}" / stage /
                            "shard-000", tables)
            print(f"[audit suite] seed {seed}: rolled out", file=log)
    finally:
        backend.close()
    return out
