"""The funnel over real sim traces (smoke and stress suites, every defense, one seed): the
metrics' ``fn_*`` columns equal :func:`rollout_funnel` on the stored events, and the
consistency invariants of paper 000 §6.3 hold on every rollout."""

from __future__ import annotations

from itertools import pairwise

import polars as pl
import pytest

from containmentbench.attacks import funnel as F
from containmentbench.metrics.compute import compute_metrics, suite_scenarios
from containmentbench.trace.io import by_rollout, read_table, shard_dirs
from tests.conftest import run_cli

DEFENSES = ("none", "prompt_only", "structured_guard", "tool_boundary", "taint_only_v1",
            "intent_ledger_v2", "rollback_v2")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("funnel") / "traces"
    for suite in ("smoke", "stress"):
        for d in DEFENSES:
            assert run_cli("rollout", "--suite", suite, "--defense", d, "--seed", 1, "--out",
                           root / suite / d / "seed=1", "--quiet") == 0
    return root


def test_funnel_columns_and_invariants(traces):
    df = pl.from_arrow(compute_metrics(traces, workers=1))
    by_id = {r["rollout_id"]: r for r in df.iter_rows(named=True)}
    stages = []
    for d in shard_dirs(traces):
        ev = by_rollout(read_table(d / "events.parquet", "events"))
        for r in read_table(d / "rollouts.parquet", "rollouts").to_pylist():
            scn = suite_scenarios(r["suite"])[r["scenario_id"]]
            f = F.rollout_funnel(ev[r["rollout_id"]], scn)
            row = by_id[r["rollout_id"]]
            if not f.attacked:
                assert all(row[c] is None for c in F.COLUMNS)
                continue
            assert {c: row[c] for c in F.COLUMNS} == f.columns()
            # goal_commit => policy_pass => exact_proposal => exposed => delivered
            chain = (f.delivered, f.exposed, f.exact_proposal, f.policy_pass, f.goal_commit)
            assert all(a or not b for a, b in pairwise(chain)), r["rollout_id"]
            assert f.stage == sum(chain)
            # every committed eq. 5 violation is goal-matched or off-target, and an
            # off-target commit is a committed violation
            if row["committed_harm"] == 1:
                assert f.goal_commit or f.offtarget_commit, r["rollout_id"]
            if f.offtarget_commit:
                assert row["committed_harm"] == 1, r["rollout_id"]
            stages.append((r["defense"], f.stage))
    # not vacuous: the sim reaches stage 5 without a defense and stops at 3 behind a guard
    assert ("none", 5) in stages and ("tool_boundary", 3) in stages
    assert not any(s == 5 for d, s in stages if d == "tool_boundary")


def test_in_process_funnel_equals_stored(stress):
    """The search's view (a live Recorder, in-process) and the metrics' view (the stored
    event rows) give the same funnel on real sim episodes."""
    from containmentbench.attacks.funnel import recorder_events, rollout_funnel
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig
    from containmentbench.models.sim import SimBackend
    from containmentbench.runtime.driver import ShardContext, run_episodes
    from containmentbench.runtime.episode import RuntimeConfig
    from containmentbench.trace.schema import EVENTS

    backend = SimBackend(BackendConfig("sim", "sim"))
    seen = set()
    for defense in ("none", "intent_ledger_v2"):
        ctx = ShardContext("test", "sim:default", "sim", defense, 1, None)
        eps, _, _ = run_episodes(stress[:24], load_defense(defense), backend, ctx,
                                 RuntimeConfig())
        for ep in eps:
            cols = ep.rec.columns(EVENTS.names)
            stored = [dict(zip(cols, vals)) for vals in zip(*cols.values())]
            live = rollout_funnel(recorder_events(ep.rec), ep.s)
            assert live == rollout_funnel(stored, ep.s)
            seen.add(live.stage)
    assert {2, 3, 5} <= seen
