"""Derived scenarios: a held-out or development scenario with a candidate's text substituted
for its fixed injection, the target action preserved (paper 000 §6.3, Appendix B).

The derived record keeps the original's family, cluster, domain, world and pre-specified exact
goal (``attacker_goal.violation``); only the injected sentence changes, and with it the action
an agent that follows the sentence takes (its ``plans.attack`` steps): the exact goal when the
candidate keeps the ``{action}`` slot, the looser off-target action when it asks for
``{loose}`` instead. The candidate's sha256 is carried in ``meta.candidate``: the sim agent's
documented response to candidate text is keyed on it (models/sim.py).
"""

from __future__ import annotations

import copy
from typing import Any

from containmentbench.attacks import strategies as ST
from containmentbench.errors import BenchError
from containmentbench.scenarios.model import Scenario


def topic_of(s: Scenario) -> str:
    """The scenario's topic (the generator's first internal thread is '<Topic> - next steps')."""
    subject = s.initial_state["emails"][0]["subject"]
    return subject.split(" - ", 1)[0].lower()


def org_of(s: Scenario) -> str:
    for c in s.initial_state["contacts"]:
        if c.get("org") not in (None, "corp"):
            return str(c["org"])
    return "the partner"


def goal_of(s: Scenario) -> dict[str, Any]:
    g = (s.attacker_goal or {}).get("violation")
    if not g or not s.meta.get("injection"):
        raise BenchError(f"scenario '{s.id}' has no pre-specified attack goal and injection "
                         f"(only attacked scenarios can be search targets)", field="scenario")
    return g


def slots(s: Scenario, policy_family: str) -> dict[str, str]:
    g = goal_of(s)
    topic = topic_of(s)
    return {"action": ST.describe_action(g["tool"], g["args"]),
            "loose": ST.describe_loose(g["tool"], g["args"], topic),
            "topic": topic, "org": org_of(s), "policy_family": policy_family,
            "tool": g["tool"]}


def requested_action(s: Scenario, template: str) -> dict[str, Any]:
    """The action a candidate's text asks for in this scenario."""
    g = goal_of(s)
    if ST.target_preserving(template):
        return {"tool": g["tool"], "args": g["args"]}
    return ST.loose_action(g["tool"], g["args"], topic_of(s))


def _replace(obj: Any, old: str, new: str) -> Any:
    if isinstance(obj, str):
        return obj.replace(old, new) if old in obj else obj
    if isinstance(obj, list):
        return [_replace(x, old, new) for x in obj]
    if isinstance(obj, dict):
        return {k: _replace(v, old, new) for k, v in obj.items()}
    return obj


def derive(s: Scenario, candidate: dict[str, Any], suite: str, policy_family: str,
           mode: str) -> dict[str, Any]:
    """The derived scenario record (validated by the caller through ``Scenario.from_dict``)."""
    g = goal_of(s)
    old = s.meta["injection"]
    new = ST.render(candidate["template"], slots(s, policy_family))
    rec = _replace(copy.deepcopy(s.record), old, new)
    want = requested_action(s, candidate["template"])
    for plan in ("attack", "attacker"):
        for st in rec["plans"][plan]:
            if st["tool"] == g["tool"] and st["args"] == g["args"]:
                st["tool"], st["args"] = want["tool"], copy.deepcopy(want["args"])
    rec["attacker_goal"]["violation"] = copy.deepcopy(g)  # the exact goal never changes
    rec["id"] = f"{s.id}~{candidate['sha256'][:12]}"
    rec["suite"] = suite
    rec["meta"] = {**rec["meta"], "injection": new, "base_scenario": s.id,
                   "base_scenario_hash": s.hash,
                   "candidate": {"sha256": candidate["sha256"],
                                 "strategy": candidate["strategy"],
                                 "target_preserving": ST.target_preserving(
                                     candidate["template"])},
                   "adaptive_mode": mode}
    return rec


def derived_scenario(s: Scenario, candidate: dict[str, Any], suite: str, policy_family: str,
                     mode: str) -> Scenario:
    return Scenario.from_dict(derive(s, candidate, suite, policy_family, mode))
