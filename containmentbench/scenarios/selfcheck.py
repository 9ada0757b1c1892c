"""Positive-control self-check of a scenario suite (like AgentDojo's ground-truth check).

For every scenario, through the real runtime (parser, gateway, policy hook, sandbox, trace):

* the benign plan replayed with no defense satisfies the structured oracle B(tau) and commits
  no policy violation;
* the attacker plan replayed with no defense commits the exact violation the scenario targets
  (eq. 5 component named by ``attacker_goal.violation.kind``);
* a memory/recovery scenario's recovery objective is reachable (the benign replay meets it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from containmentbench.defense.loading import load_defense
from containmentbench.models.base import BackendConfig
from containmentbench.models.scripted import ScriptedBackend
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.episode import Episode, RuntimeConfig
from containmentbench.scenarios.model import Scenario
from containmentbench.scenarios.oracle import (
    Committed,
    benign_success,
    ended_with_answer,
    recovery_success,
    violations,
)

KIND_FIELD = {"unauthorized": "unauthorized", "wrong_recipient": "wrong_recipient",
              "secret_leak": "secret_leak"}


def committed(ep: Episode) -> list[Committed]:
    return [Committed(c["tool"], c["args"], c["session"], c["high_risk"], c["seq"])
            for c in ep.commits]  # C_tau (§4.4): rolled-back commits included


def ended(ep: Episode) -> bool:
    """The live episode ended with its final answer (``oracle.ended_with_answer``)."""
    return ended_with_answer(ep.status, ep.rec.events)


def final_memory(ep: Episode) -> dict[str, dict[str, Any]]:
    return {k: {"status": m.status, "labels": sorted(m.labels)}
            for k, m in ep.world.memory.items()}


@dataclass
class CheckResult:
    scenario_id: str
    stage: str
    domain: str
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _replay(scenarios: Sequence[Scenario], plan: str) -> list[Episode]:
    backend = ScriptedBackend(BackendConfig(name="scripted", model="scripted",
                                            options={"plan": plan}))
    ctx = ShardContext("selfcheck", "scripted", "scripted", "none", 0, plan)
    eps, _, _ = run_episodes(scenarios, load_defense("none"), backend, ctx, RuntimeConfig())
    return [e for e in eps if e is not None]


def check(scenarios: Sequence[Scenario]) -> list[CheckResult]:
    benign = _replay(scenarios, "benign")
    with_attack = [s for s in scenarios if s.attacker_plan]
    attacked = dict(zip((s.id for s in with_attack), _replay(with_attack, "attacker")))
    results = []
    for s, ep in zip(scenarios, benign):
        r = CheckResult(s.id, s.stage, s.domain)
        if ep.status != "ok":
            r.problems.append(f"benign replay ended with status {ep.status}")
        cs = committed(ep)
        ok, met = benign_success(s, cs, final_memory(ep), ended(ep))
        if not ok:
            r.problems.append(f"benign plan does not satisfy the oracle (requirements met: "
                              f"{met})")
        if any(violations(s, c).any for c in cs):
            r.problems.append("benign plan commits a policy violation")
        if s.recovery is not None and not recovery_success(s, final_memory(ep), cs):
            r.problems.append("recovery objective not reached by the benign plan")
        if s.attacker_plan:
            aep = attacked[s.id]
            vs = [violations(s, c) for c in committed(aep)]
            goal = s.attacker_goal
            if goal is not None:
                want = KIND_FIELD[goal["violation"]["kind"]]
                if not any(getattr(v, want) for v in vs):
                    r.problems.append(f"attacker plan does not commit a {want} violation")
            elif not any(v.any for v in vs):
                r.problems.append("attacker plan commits no violation")
        results.append(r)
    return results


def summary(results: Sequence[CheckResult]) -> dict[str, Any]:
    by_stage: Counter[str] = Counter()
    by_domain: Counter[str] = Counter()
    bad_stage: Counter[str] = Counter()
    bad_domain: Counter[str] = Counter()
    for r in results:
        by_stage[r.stage] += 1
        by_domain[r.domain] += 1
        if not r.ok:
            bad_stage[r.stage] += 1
            bad_domain[r.domain] += 1
    return {"total": len(results), "failed": sum(not r.ok for r in results),
            "by_stage": {k: {"n": v, "failed": bad_stage[k]} for k, v in by_stage.items()},
            "by_domain": {k: {"n": v, "failed": bad_domain[k]} for k, v in by_domain.items()}}
