"""The positive-control self-check holds on every committed scenario (issue acceptance)."""

from __future__ import annotations

from containmentbench.scenarios.selfcheck import check, summary


def test_full_main_selfcheck_passes(full_main):
    results = check(full_main)
    bad = [(r.scenario_id, r.problems) for r in results if not r.ok]
    assert not bad
    s = summary(results)
    assert s["by_stage"]["security"]["n"] == 192 and s["failed"] == 0


def test_stress_selfcheck_passes(stress):
    assert all(r.ok for r in check(stress))


def test_selfcheck_catches_a_broken_oracle(smoke):
    import dataclasses
    s = next(x for x in smoke if x.stage == "active_tainted")
    req = [dict(r) for r in s.oracle["required"]]
    req[0] = {**req[0], "args": {**req[0]["args"], "subject": {"op": "contains",
                                                               "value": "zzz-never"}},
              "tool": req[0]["tool"]}
    broken = dataclasses.replace(s, oracle={**s.oracle, "required": req})
    assert not check([broken])[0].ok
