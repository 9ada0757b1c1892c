"""The live emitter at the gateway boundary: capture-time rows agree with the post-hoc
projection on every column but time; batching, retry and backpressure (App. C.4)."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

from containmentbench.cim.live import LiveEmitter, tap
from containmentbench.cim.project import project_events
from containmentbench.defense.loading import load_defense
from containmentbench.errors import BenchError
from containmentbench.models.base import BackendConfig, make_backend
from containmentbench.runtime.driver import ShardContext, drive_lockstep, new_episode, shard_tables
from containmentbench.runtime.episode import RuntimeConfig


def test_live_rows_agree_with_post_hoc_projection(smoke):
    batches: list[pa.Table] = []
    em = LiveEmitter(batches.append, batch_rows=64)
    policy = load_defense("none")
    ctx = ShardContext("live", "sim:default", "sim", "none", 1, None)
    cfg = RuntimeConfig()
    done = []

    def make(s):
        def build():
            ep = new_episode(s, policy, ctx, cfg)
            tap(ep, em)
            return ep
        return build

    backend = make_backend(BackendConfig(name="sim", model="sim:default"))
    drive_lockstep([make(s) for s in smoke[:40]], backend, 8, None,
                   lambda i, ep, w, m: done.append(ep))
    em.close()
    assert em.stats["n_batches"] > 1 and em.stats["n_dropped"] == 0
    live = pl.from_arrow(pa.concat_tables(batches))
    t = shard_tables(done, ctx, policy, False, [0.0] * len(done), [0.0] * len(done))
    post = pl.from_arrow(project_events(t["events"], t["rollouts"])[0])
    cols = [c for c in post.columns if c != "time"]
    assert live.height == post.height > 100
    assert live.select(cols).sort("event_id").equals(post.select(cols).sort("event_id"))
    # capture time is the wall clock, not the logical tick
    assert live["time"].min() > post["time"].max()


def _table(n: int) -> list[dict]:
    return [{"rollout_id": "r", "seq": i, "event_id": f"r:{i}", "kind": "message",
             "session": 1, "tick": i, "agent_id": "a", "agent_instance": "a#1",
             "delegation_id": "d", "delegation_parent_id": None, "principal_id": "u",
             "binding": "bound", "call_id": None, "tool": None, "action_semantic": "invoke",
             "direction": None, "resource_class": "agent", "resource_id": None,
             "sensitivity_label": None, "principal_scope": None, "target_principal": None,
             "target": None, "outcome": None, "agent_hints": None, "integrity": None}
            for i in range(n)]


def test_retry_and_backpressure():
    state = {"fail": 3}
    got: list[int] = []

    def flaky(t: pa.Table) -> None:
        if state["fail"]:
            state["fail"] -= 1
            raise OSError("sink down")
        got.append(t.num_rows)

    em = LiveEmitter(flaky, batch_rows=2, max_pending=4, backoff_s=0.0)
    for ev in _table(10):
        em.observe(ev)
    em.close()
    assert sum(got) == 10 and em.stats["n_retries"] == 3 and em.stats["n_dropped"] == 0

    def dead(t: pa.Table) -> None:
        raise OSError("sink down")

    drop = LiveEmitter(dead, batch_rows=2, max_pending=2, policy="drop")
    for ev in _table(10):
        drop.observe(ev)
    assert drop.stats["n_dropped"] == 6  # 5 batches of 2, 2 may wait: 3 dropped, counted
    block = LiveEmitter(dead, batch_rows=2, max_pending=1, block_retries=2, backoff_s=0.0)
    with pytest.raises(BenchError, match="capture stops"):
        for ev in _table(10):
            block.observe(ev)
