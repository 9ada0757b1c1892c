"""``containmentbench defenses check NAME``: a defense run on the scripted reference plans of a
suite, and what a researcher needs to know before measuring it.

The benign and attacker plans of every scenario (the ``scenarios check`` replay: no model,
the real parser, gateway, sandbox and trace) run under the defense twice with one instance
and once with a fresh one. The checker reports:

* **determinism**: the same inputs get the same decisions (every defense event's kind,
  decision, rule id, layer and evidence, rollout by rollout, across the three runs; a
  defense that keeps state across rollouts or draws from an unseeded source differs);
* **rule ids**: every decision carries one (the host refuses a result without one, so a
  violation shows as a hook error);
* **hook errors**: a hook that raised or answered malformed (an error row in a study);
* **no access to ground truth, no writes outside the trace**: Python's audit events while a
  hook runs (``defense/watch.py``): frame or object introspection, reads of the suites' or
  results' files, writes, network and process calls;
* **hook timing**: calls and median/p90 time per hook.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containmentbench.defense.loading import Loaded, load_defense
from containmentbench.defense.watch import Finding, watching
from containmentbench.models.base import BackendConfig
from containmentbench.models.scripted import ScriptedBackend
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.episode import Episode, RuntimeConfig
from containmentbench.scenarios.model import Scenario

#: the trace events a defense decides (defense/api.py)
DEFENSE_KINDS = frozenset({"decision", "confirmation", "task_plan", "output_check",
                           "commit_check", "answer_check"})


@dataclass
class CheckReport:
    defense: str
    rollouts: int = 0
    decisions: int = 0
    without_rule: list[str] = field(default_factory=list)
    nondeterministic: list[str] = field(default_factory=list)
    hook_errors: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    timing: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.without_rule or self.nondeterministic or self.hook_errors
                    or self.findings)

    def lines(self) -> list[str]:
        def mark(ok: bool) -> str:
            return "ok  " if ok else "FAIL"

        out = [f"defense {self.defense}: {self.rollouts} rollouts (scripted benign and "
               f"attacker plans), {self.decisions} defense decisions"]
        out.append(f"  {mark(not self.nondeterministic)} determinism: same inputs, same "
                   f"decisions" + (f" -- differs on {len(self.nondeterministic)}: "
                                   f"{self.nondeterministic[0]}" if self.nondeterministic
                                   else ""))
        out.append(f"  {mark(not self.without_rule)} rule ids on every decision"
                   + (f" -- missing on {self.without_rule[0]}" if self.without_rule else ""))
        out.append(f"  {mark(not self.hook_errors)} hooks ran without errors"
                   + (f" -- {len(self.hook_errors)}: {self.hook_errors[0]}"
                      if self.hook_errors else ""))
        gt = [f for f in self.findings if not f.detail.startswith(("writes", "os.", "shutil",
                                                                   "socket", "subprocess"))]
        wr = [f for f in self.findings if f not in gt]
        for ok, what, fs in ((not gt, "no access to the benchmark's ground truth", gt),
                             (not wr, "no writes, network or processes outside the trace",
                              wr)):
            f0 = fs[0] if fs else None
            out.append(f"  {mark(ok)} {what}" + (
                f" -- defense '{f0.layer}' hook '{f0.hook}' on scenario '{f0.scenario}': "
                f"{f0.detail}" if f0 else ""))
        for hook, t in sorted(self.timing.items()):
            out.append(f"  time  {hook}: {int(t['calls'])} calls, median "
                       f"{t['median_ms']:.3f} ms, p90 {t['p90_ms']:.3f} ms")
        return out


def _decisions(ep: Episode) -> list[tuple[Any, ...]]:
    return [(e["kind"], e.get("decision"), e.get("rule_id"), e.get("layer"),
             e.get("evidence"), e.get("tool")) for e in ep.rec.events
            if e["kind"] in DEFENSE_KINDS]


def _run(scenarios: Sequence[Scenario], plan: str, defense: Loaded) -> list[Episode]:
    backend = ScriptedBackend(BackendConfig(name="scripted", model="scripted",
                                            options={"plan": plan}))
    ctx = ShardContext("defense-check", "scripted", "scripted", defense.label, 0, plan)
    eps, _, _ = run_episodes(scenarios, defense, backend, ctx, RuntimeConfig())
    return [e for e in eps if e is not None]


def check_defense(label: str, defenses: dict[str, Any], scenarios: Sequence[Scenario],
                  protected: Sequence[Path] = ()) -> CheckReport:
    report = CheckReport(label)
    attacked = [s for s in scenarios if s.attacker_plan]
    one = load_defense(label, defenses)
    fresh = load_defense(label, defenses)
    per_hook: dict[str, list[float]] = {}
    with watching(tuple(protected)) as w:
        runs = {}
        for plan, scen in (("benign", scenarios), ("attacker", attacked)):
            runs[plan] = [_run(scen, plan, one), _run(scen, plan, one), _run(scen, plan, fresh)]
        report.findings = list(w.findings)
    for plan, (a, b, c) in runs.items():
        for x, y, z in zip(a, b, c, strict=True):
            report.rollouts += 1
            da = _decisions(x)
            report.decisions += len(da)
            where = f"scenario '{x.s.id}' ({plan} plan)"
            if not (da == _decisions(y) == _decisions(z)):
                report.nondeterministic.append(where)
            if x.status == "error" and (x.error or "").startswith("defense error"):
                report.hook_errors.append(f"{where}: {x.error}")
            report.without_rule += [f"{where}: {k}" for k, _, rule, *_ in da if not rule]
            for cost in x.host.costs.values():
                for hook, secs in cost.per_hook.items():
                    per_hook.setdefault(hook, []).extend(secs)
    for hook, xs in per_hook.items():
        xs = sorted(xs)
        report.timing[hook] = {"calls": len(xs), "median_ms": statistics.median(xs) * 1000,
                               "p90_ms": xs[min(len(xs) - 1, int(0.9 * len(xs)))] * 1000}
    return report
