"""AgentDojo qualification (adapters/agentdojo/qualify.py): a task whose utility check passes
on the untouched environment is rejected before any model runs, and the record reports the
native parser's no-call rate."""

from __future__ import annotations

import pytest

pytest.importorskip("agentdojo")

from containmentbench.adapters.agentdojo import qualify as Q
from containmentbench.adapters.agentdojo import run as R
from containmentbench.defense.loading import load_defense


def test_tasks_that_pass_with_no_action():
    # banking user_task_5: the untouched environment already holds the 50.00 Spotify payment
    assert Q.passes_without_action("banking", "user_task_5")
    assert Q.passes_without_action("banking", "user_task_8")  # its check returns True
    assert not Q.passes_without_action("banking", "user_task_4")
    assert not Q.passes_without_action("workspace", "user_task_0")


def test_qualification_rejects_them_and_counts_rows_without_a_native_call(monkeypatch):
    real = R.run_specs

    def no_call_for_task_8(cfg, specs, *a, **k):
        out = real(cfg, specs, *a, **k)
        for o in out:
            if o.spec.user_id == "user_task_8":
                o.native_calls = 0  # as if the provider's parser found no call
        return out

    monkeypatch.setattr(R, "run_specs", no_call_for_task_8)
    cfg = R.RunSettings("q", "banking", load_defense("none"), 1)
    rec = Q.qualify(cfg, ["user_task_4", "user_task_5", "user_task_8"], [1])
    # the ground truth solves all three, but two of them would pass doing nothing
    assert [rec["tasks"][u]["utility"] for u in ("user_task_4", "user_task_5")] == [[True]] * 2
    assert rec["passes_without_action"] == ["user_task_5", "user_task_8"]
    assert rec["eligible"] == ["user_task_4"] and rec["frozen"] == ["user_task_4"]
    assert rec["tasks"]["user_task_5"]["passes_without_action"] is True
    assert (rec["no_call_rows"], rec["no_call_rate"]) == (1, pytest.approx(1 / 3))
    assert [rec["tasks"][u]["no_call_rows"] for u in ("user_task_4", "user_task_8")] == [0, 1]
