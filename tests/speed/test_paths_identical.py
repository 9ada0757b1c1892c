"""The faster path gives the same bytes as the per-shard path at the same commit.

The smoke study is run twice: once shard by shard (``rollout --study-config --shard --out``,
one backend per shard, as the pipeline ran before multi-shard jobs) and once as a single
multi-shard job (``cluster.rollout_group=model``: one process, cached suite, one backend,
shards read from the pre-flight's ``plan.json``),
then ``metrics`` and ``analyze`` on each. Traces (rollouts, events, edges), the metrics table
and every table and figure data file must hash the same. Only ``timings.parquet`` (wall
seconds, by design) and the job records are left out.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from containmentbench.cli.main import main
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.pipeline.plan import run_dir, shards

TRACE_FILES = ("rollouts.parquet", "events.parquet", "edges.parquet")


def _digest(root: Path, names: tuple[str, ...] | None = None) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and (names is None or p.name in names):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _run(tmp: Path, group: str, per_shard: bool) -> dict[str, dict[str, str]]:
    data = load_study(["study=smoke", f"results_dir={tmp}", f"cluster.rollout_group={group}"])
    run = run_dir(data)
    cfg = run / "config.yaml"
    save_resolved(data, cfg)
    if per_shard:
        for s in shards(data):
            assert main(["rollout", "--study-config", str(cfg), "--shard", s.id, "--out",
                         str(run / "traces" / s.id), "--quiet"]) == 0
    else:  # the pipeline's path: the pre-flight's plan file, read by the job
        from containmentbench.config.compose import read_resolved
        from containmentbench.pipeline.planfile import read_plan, save_plan

        save_plan(read_resolved(cfg), cfg, shards(read_resolved(cfg)))
        assert read_plan(cfg) is not None
        assert main(["rollout", "--study-config", str(cfg), "--job", "all", "--quiet"]) == 0
    metrics = run / "metrics" / "rollout_metrics.parquet"
    assert main(["metrics", str(run / "traces"), "--out", str(metrics), "--workers", "2"]) == 0
    assert main(["analyze", str(metrics), "--out", str(run), "--config", str(cfg),
                 "--resamples", "200"]) == 0
    return {"traces": _digest(run / "traces", TRACE_FILES),
            "metrics": _digest(run / "metrics"),
            "tables": _digest(run / "tables"),
            "figures": {k: v for k, v in _digest(run / "figures").items()
                        if not k.endswith((".png", ".pdf", ".svg"))}}


@pytest.mark.slow
def test_multi_shard_job_matches_per_shard_path(tmp_path):
    per_shard = _run(tmp_path / "a", "shard", per_shard=True)
    one_job = _run(tmp_path / "b", "model", per_shard=False)
    assert len(per_shard["traces"]) == 3 * 56  # 7 defenses x 2 seeds x 4 stages
    assert per_shard["metrics"] and per_shard["tables"]
    for part in per_shard:
        assert per_shard[part] == one_job[part], part
