"""``status`` shows every step of a run's chain: done when its outputs exist and are not older
than what they read, outdated when an input is newer (or itself not done), pending when an
output is missing; AgentDojo and adaptive studies list their own steps."""

from __future__ import annotations

import os

from containmentbench.config.compose import load_study
from containmentbench.pipeline.chain import ADAPTER, ADAPTIVE, OURS, chain, steps_of
from containmentbench.pipeline.plan import run_dir


def _touch(root, rel, t):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("x")
    os.utime(p, (t, t))


def test_states_follow_outputs_and_times(tmp_path):
    data = load_study(["study=smoke", f"results_dir={tmp_path}", "study.seeds=[1]"])
    root = run_dir(data)
    shards = {"done": [], "missing": ["a", "b"]}
    steps = dict((s, st) for s, st, _ in chain(data, shards))
    assert steps["rollouts"] == "pending" and set(steps.values()) == {"pending"}
    shards = {"done": ["a", "b"]}
    for sid in ("a", "b"):
        _touch(root / "traces" / sid, "SHA256SUMS", 1000)
    t = 2000
    for _, outputs, _ in OURS:
        for rel in outputs:
            _touch(root, rel, t)
        t += 10
    got = chain(data, shards)
    assert [s for s, _, _ in got] == ["rollouts", *(s for s, _, _ in OURS)]
    assert all(st == "done" for _, st, _ in got), got
    # the metrics redone later: everything reading them is outdated, the audit (which reads
    # only the shards) and reparse stay done
    _touch(root, "metrics/rollout_metrics.parquet", 9000)
    steps = {s: st for s, st, _ in chain(data, shards)}
    assert steps["metrics"] == steps["reparse"] == steps["audit"] == "done"
    for s in ("analysis", "tables", "cases", "report", "freeze"):
        assert steps[s] == "outdated", s
    (root / "MANIFEST.json").unlink()
    assert {s: st for s, st, _ in chain(data, shards)}["freeze"] == "pending"


def test_each_kind_of_study_has_its_chain(tmp_path):
    assert steps_of(load_study(["study=agentdojo_smoke", f"results_dir={tmp_path}"])) is ADAPTER
    assert steps_of(load_study(["study=adaptive_smoke", f"results_dir={tmp_path}"])) is ADAPTIVE
    assert [s for s, _, _ in ADAPTIVE][-2:] == ["report", "freeze"]
