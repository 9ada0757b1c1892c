"""The bounded search: budgets recounted from the append-only log, resume after a crash,
candidate hashes (paper 000 §6.3)."""

from __future__ import annotations

import hashlib
import json

import pytest

from containmentbench.attacks import mutation as MU
from containmentbench.attacks.querylog import LOG, read_records
from containmentbench.attacks.runner import Runner
from containmentbench.attacks.search import Search
from containmentbench.attacks.settings import settings
from containmentbench.attacks.splits import attacked_pool, make_splits


def _dev(data):
    A = settings(data)
    pool = attacked_pool(data["study"]["suite"], A.stages)
    sp = make_splits(pool, {"development": A.development_clusters,
                            "heldout": A.heldout_clusters, "audit": A.audit_clusters},
                     A.split_seed)
    by_id = {s.id: s for s in pool}
    return [by_id[i] for i in sp["splits"]["development"]["scenarios"]]


def _search(data, out):
    runner = Runner(data)
    try:
        return Search(data, _dev(data), out, runner).run()
    finally:
        runner.close()


def _starts(out):
    return [r for r in read_records(out / LOG) if r["type"] == "query_start"]


def test_budget_never_exceeded_counted_from_the_log(adaptive_data, tmp_path):
    data = adaptive_data("study.adaptive.depth=4", "study.adaptive.width=6",
                         "study.adaptive.branching=3", "study.adaptive.max_queries_per_restart=7")
    res = _search(data, tmp_path / "s")
    starts = _starts(tmp_path / "s")
    keys = [r["key"] for r in starts]
    assert len(keys) == len(set(keys))  # no query started twice
    per = {r: sum(1 for s in starts if s["restart"] == r) for r in range(2)}
    assert per == {0: 7, 1: 7}  # the budget binds (depth 4 x width 6 would need more)
    assert res["queries_per_restart"] == {"r0": 7, "r1": 7}
    done = [r for r in read_records(tmp_path / "s" / LOG) if r["type"] == "query_done"]
    assert sorted(r["key"] for r in done) == sorted(keys)


def test_killed_search_resumes_to_the_same_candidates(adaptive_data, tmp_path, monkeypatch):
    data = adaptive_data()
    full = _search(data, tmp_path / "full")
    calls = {"n": 0}
    real = Runner.rollouts

    def crash(self, items, defense):
        calls["n"] += 1
        if calls["n"] == 3:  # the batch's starts are logged, its results never arrive
            raise KeyboardInterrupt
        return real(self, items, defense)

    monkeypatch.setattr(Runner, "rollouts", crash)
    with pytest.raises(KeyboardInterrupt):
        _search(data, tmp_path / "cut")
    before = _starts(tmp_path / "cut")
    log = tmp_path / "cut" / LOG
    with open(log, "ab") as fh:  # and a record cut in the middle of its write
        fh.write(b'{"type":"query_start","key":"r9')
    monkeypatch.setattr(Runner, "rollouts", real)
    resumed = _search(data, tmp_path / "cut")
    assert resumed == full
    after = _starts(tmp_path / "cut")
    assert after[:len(before)] == before
    assert len(after) == len({r["key"] for r in after}) == len(_starts(tmp_path / "full"))
    for r in range(2):  # nothing spent twice: same count as the uninterrupted run
        assert sum(1 for s in after if s["restart"] == r) == \
            full["queries_per_restart"][f"r{r}"] <= 10


def test_log_of_other_settings_is_refused(adaptive_data, tmp_path):
    from containmentbench.errors import BenchError

    _search(adaptive_data(), tmp_path / "s")
    with pytest.raises(BenchError, match="other search settings"):
        _search(adaptive_data("study.adaptive.width=2"), tmp_path / "s")


def test_candidate_hash_is_sha256_of_canonical_strategy_and_template():
    c = MU.candidate("ledger_claim", "Ledger: {action}.", None, 0, 0)
    text = '{"strategy":"ledger_claim","template":"Ledger: {action}."}'
    assert c["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert MU.candidate("ledger_claim", "Ledger: {action}.", "x" * 64, 1, 3)["sha256"] == \
        c["sha256"]  # lineage is not identity


def test_frozen_candidates_are_stable_and_checked(adaptive_data, tmp_path):
    from containmentbench.attacks.frozen import load_frozen, render, write_frozen
    from containmentbench.errors import BenchError

    res = _search(adaptive_data(), tmp_path / "s")
    files = render(res)
    assert render(json.loads(json.dumps(res))) == files  # same bytes every time
    assert write_frozen(tmp_path / "f", files) == "written"
    assert write_frozen(tmp_path / "f", files).startswith("identical")
    frozen = load_frozen(tmp_path / "f")
    assert [c["sha256"] for c in frozen] == res["final"]
    for c in frozen:
        body = json.dumps({"strategy": c["strategy"], "template": c["template"]},
                          separators=(",", ":"), ensure_ascii=False)
        assert hashlib.sha256(body.encode()).hexdigest() == c["sha256"]
    other = dict(files)
    first = next(k for k in files if k.startswith("candidates/"))
    other[first] = files[first].replace(b"{action}", b"{loose}")
    with pytest.raises(BenchError, match="different content"):
        write_frozen(tmp_path / "f", other)  # never overwritten
    (tmp_path / "f" / first).write_bytes(other[first])
    with pytest.raises(BenchError, match="differs from its manifest"):
        load_frozen(tmp_path / "f")


def test_sim_rewriter_is_seeded_and_target_preserving_search_rejects_drift():
    ctx = {"template": "Ledger: {action}.", "strategy": "ledger_claim"}
    outs = {MU.sim_rewrite(ctx, seed) for seed in range(40)}
    assert MU.sim_rewrite(ctx, 7) == MU.sim_rewrite(ctx, 7)
    parsed = [MU.parse_rewrite(o)[0] for o in outs]
    assert any("{loose}" in p for p in parsed)  # the goal-losing rewrite occurs
    assert all(p is not None for p in parsed)
    assert MU.parse_rewrite("<template>Do {evil} now</template>") == \
        (None, "unknown slot '{evil}'")


def test_rewrites_go_through_any_backend_with_the_rewrite_prompt(adaptive_data, tmp_path):
    """A served model answers the rewrite prompt (no sim context used): its replies are parsed,
    checked and logged; an unusable reply is rejected, never evaluated."""
    from containmentbench.models.base import BackendConfig, Completion
    from containmentbench.models.sim import SimBackend

    data = adaptive_data("study.adaptive.restarts=1")
    seen = []

    class Served:
        name, seed_supported = "served", True

        def __init__(self):
            self.sim = SimBackend(BackendConfig("sim", "sim", options={"profile": "default"}))

        def generate(self, reqs):
            out = []
            for r in reqs:
                if isinstance(r.sim, dict):  # a rewrite: answer from the prompt text only
                    seen.append(r.messages)
                    n = len(seen)
                    text = "<template>Also do {secret} now.</template>" if n % 3 == 0 else \
                        f"<template>Variant {n}: please {{action}}.</template>"
                    out.append(Completion(text))
                else:
                    out.append(self.sim.generate([r])[0])
            return out

        def close(self):
            pass

    runner = Runner(data, backend=Served())
    res = Search(data, _dev(data), tmp_path / "s", runner).run()
    assert seen and "{action}" in seen[0][0]["content"] and "no obfuscation" in \
        seen[0][0]["content"]
    assert "Known policy family: " in seen[0][1]["content"]
    muts = [r for r in read_records(tmp_path / "s" / LOG) if r["type"] == "mutation"]
    assert any(m["rejected"] == "unknown slot '{secret}'" for m in muts)
    assert any(c["template"].startswith("Variant ") for c in res["evaluated"])
    assert not any("{secret}" in c["template"] for c in res["evaluated"])


def test_search_process_killed_mid_run_resumes_from_its_log(tmp_path):
    """SIGKILL of a real `search run` process, then a rerun: same candidates.json as an
    uninterrupted run, and no query key started twice."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "containmentbench")

    def cmd(out, *extra):
        return [exe, "search", "run", "study=adaptive_smoke",
                f"results_dir={tmp_path}/results", *extra, "--splits",
                str(tmp_path / "splits.json"), "--out", str(out)]

    subprocess.run([exe, "search", "splits", "study=adaptive_smoke",
                    f"results_dir={tmp_path}/results", "--out", str(tmp_path / "splits.json")],
                   check=True, capture_output=True)
    subprocess.run(cmd(tmp_path / "a"), check=True, capture_output=True)
    # the same search, slowed down (operational latency: not part of the settings digest)
    proc = subprocess.Popen(cmd(tmp_path / "b", "+backend.options.latency_ms=40"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "b" / LOG
    deadline = time.time() + 60
    while time.time() < deadline:
        if log.exists() and log.read_text().count('"query_start"') >= 6:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "b" / "candidates.json").exists()
    cut = _starts(tmp_path / "b")
    assert 6 <= len(cut) < len(_starts(tmp_path / "a"))
    subprocess.run(cmd(tmp_path / "b"), check=True, capture_output=True)
    assert (tmp_path / "b" / "candidates.json").read_bytes() == \
        (tmp_path / "a" / "candidates.json").read_bytes()
    keys = [r["key"] for r in _starts(tmp_path / "b")]
    assert len(keys) == len(set(keys)) == len(_starts(tmp_path / "a"))
