"""Intervals computed in worker processes equal those computed in process, in order."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from containmentbench.analysis import parallel
from containmentbench.analysis.paired import Settings, compare


def _frame(n_scen: int = 60) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for i in range(n_scen):
        stage = ("security", "clean")[i % 2]
        for d in ("none", "tool_boundary", "rollback_v2"):
            for seed in (1, 2, 3):
                rows.append({"scenario_id": f"s{i}", "cluster_id": f"c{i // 3}",
                             "model": "sim:default", "seed": seed, "stage": stage,
                             "defense": d, "status": "ok",
                             "committed_harm": int(rng.random() < (0.5 if d == "none" else .1)),
                             "blast_radius_norm": float(rng.random())})
    return pl.DataFrame(rows)


@pytest.mark.slow
def test_compare_many_matches_compare(monkeypatch):
    df = _frame()
    s = Settings(resamples=500, confidence=0.95, seed=11, max_batch_elements=1 << 20)
    specs = [{"a": "none", "b": b, "metric": m, "stage": st}
             for b in ("tool_boundary", "rollback_v2")
             for m, st in (("committed_harm", "security"), ("blast_radius_norm", "all"),
                           ("committed_harm", "memory_recovery"))]  # the last has no pairs
    want = [compare(df, sp["a"], sp["b"], sp["metric"], sp["stage"], s) for sp in specs]
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 0)
    assert parallel.compare_many(df, specs, s, workers=2) == want
    assert parallel.compare_many(df, specs, s, workers=1) == want
    assert want[2].n_pairs == 0 and want[0].n_pairs > 0
