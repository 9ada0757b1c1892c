"""Scenario records: the typed view of one line of a scenario manifest.

A scenario is stored as canonical JSON (one line of ``scenarios/<suite>/<stage>.jsonl``) and
hashed over that JSON. :func:`Scenario.from_dict` validates a record and names the offending
field in a one-line error; file and line are added by the manifest reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.errors import ValidationError
from containmentbench.sandbox.tools import TOOLS

STAGES = ("security", "memory_recovery", "active_tainted", "clean")
DOMAINS = ("email", "document", "calendar_crm")
TOPOLOGIES = ("single", "supervisor_worker", "peer_chain")
MEMORY_MODES = ("session", "persistent")
CARRIERS = ("retrieved_document", "tool_result", "inter_agent_message", "persistent_memory")
ATTACK_GOALS = ("unauthorized_side_effect", "wrong_recipient", "secret_leakage", "persistence")
PREDICATE_OPS = ("eq", "in", "contains", "contains_all", "not_contains", "max_visibility",
                 "absent_or_empty", "any", "contains_date")

SCHEMA_VERSION = 1
# A scenario id becomes part of rollout ids, trace page names and report links: one plain
# name (integrity/paths.py's rule, plus '~', which derived adaptive ids carry:
# ``<base id>~<candidate sha256[:12]>``), never empty, never a path.
SCENARIO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+~-]{0,127}")


def _req(d: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(d, dict):
        raise ValidationError(f"expected an object at {where}", field=where)
    if key not in d:
        raise ValidationError("missing", field=f"{where}{key}")
    value = d[key]
    if not isinstance(value, typ):
        names = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise ValidationError(f"expected {names}, got {type(value).__name__}",
                              field=f"{where}{key}")
    return value


def _choice(value: Any, allowed: tuple[str, ...], field: str) -> str:
    if value not in allowed:
        raise ValidationError(f"'{value}' is not one of {', '.join(allowed)}", field=field)
    return value


def _scenario_id(value: str) -> str:
    if not SCENARIO_ID.fullmatch(value) or ".." in value:
        raise ValidationError(f"{value!r} is not a plain scenario id (letters, digits, "
                              f"'_.+~-', starting with a letter or digit; no '/', no '..', "
                              f"at most 128 characters)", field="id")
    return value


def _session(value: Any, n_goals: int, field: str) -> int:
    """Sessions are numbered 1..n (one trusted goal each); 0, negative or past the last goal
    would run a step in a session that never starts."""
    if not 1 <= value <= n_goals:
        raise ValidationError(f"session {value} is outside 1..{n_goals} (one per goal)",
                              field=field)
    return value


def _tool(name: Any, field: str) -> str:
    if name not in TOOLS and name != "final_answer":
        raise ValidationError(f"unknown tool '{name}'", field=field)
    return name


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One reference action: which agent takes it, in which session, with which arguments."""

    agent: str
    tool: str  # a sandbox tool or "final_answer"
    args: dict[str, Any]
    session: int = 1

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> PlanStep:
        tool = _tool(_req(d, "tool", str, where), f"{where}tool")
        args = _req(d, "args", dict, where)
        if tool != "final_answer":
            from containmentbench.sandbox.tools import validate_args
            err = validate_args(tool, args)
            if err:
                raise ValidationError(err, field=f"{where}args")
        return cls(_req(d, "agent", str, where), tool, args, int(d.get("session", 1)))

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "tool": self.tool, "args": self.args, "session": self.session}


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One trusted authorization (a, t, phi) of the intent ledger (paper 000 eq. 8)."""

    action: str
    target_field: str
    target: str
    predicate: dict[str, dict[str, Any]]

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str) -> LedgerEntry:
        action = _tool(_req(d, "action", str, where), f"{where}action")
        if action == "final_answer":
            raise ValidationError("final_answer is not a ledger action", field=f"{where}action")
        spec = TOOLS[action]
        target_field = _req(d, "target_field", str, where)
        if target_field not in spec.param_names:
            raise ValidationError(f"tool '{action}' has no argument '{target_field}'",
                                  field=f"{where}target_field")
        predicate = _req(d, "predicate", dict, where)
        for fname, clause in predicate.items():
            if fname not in spec.param_names:
                raise ValidationError(f"tool '{action}' has no argument '{fname}'",
                                      field=f"{where}predicate.{fname}")
            _choice(_req(clause, "op", str, f"{where}predicate.{fname}."), PREDICATE_OPS,
                    f"{where}predicate.{fname}.op")
        return cls(action, target_field, _req(d, "target", str, where), predicate)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "target_field": self.target_field, "target": self.target,
                "predicate": self.predicate}


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    suite: str
    family: str
    cluster_id: str
    stage: str
    domain: str
    topology: str
    memory_mode: str
    carrier: str | None
    attack_goal: str | None
    goals: tuple[str, ...]  # trusted user goal per session (two sessions in memory_recovery)
    agents: tuple[dict[str, Any], ...]
    initial_state: dict[str, Any]
    untrusted: tuple[dict[str, Any], ...]
    canaries: tuple[dict[str, Any], ...]
    ledger: tuple[LedgerEntry, ...]
    tool_boundary: dict[str, Any]
    authorization: dict[str, Any]
    memory_high_risk: bool
    oracle: dict[str, Any]
    attacker_goal: dict[str, Any] | None
    recovery: dict[str, Any] | None
    benign_plan: tuple[PlanStep, ...]
    attacker_plan: tuple[PlanStep, ...]
    attack_steps: tuple[PlanStep, ...]
    # reads the runtime takes for the entry agent before its first model call of a session
    # (the exposed suites: the carrier reaches the agent in its first observation); () for
    # records without the key, so their hashes are unchanged
    prefill: tuple[PlanStep, ...]
    meta: dict[str, Any]
    record: dict[str, Any]  # the validated JSON record (hashed as is)
    # sha256 of ``record``, computed on first use: the runtime and the metrics ask for it once
    # per rollout (17,640 times for 504 scenarios in full_main)
    _hash: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def user_goal(self) -> str:
        return self.goals[0]

    @property
    def n_sessions(self) -> int:
        return len(self.goals)

    @property
    def hash(self) -> str:
        if self._hash is None:
            object.__setattr__(self, "_hash", sha256_json(self.record))
        return self._hash  # type: ignore[return-value]

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return tuple(a["id"] for a in self.agents)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scenario:
        from containmentbench.scenarios.shape import check_shape

        check_shape(d)  # every field's JSON type at every level, named (shape.py)
        w = ""
        if _req(d, "schema_version", int, w) != SCHEMA_VERSION:
            raise ValidationError(f"unsupported schema_version {d['schema_version']}",
                                  field="schema_version")
        stage = _choice(_req(d, "stage", str, w), STAGES, "stage")
        carrier = d.get("carrier")
        if carrier is not None:
            _choice(carrier, CARRIERS, "carrier")
        goal = d.get("attack_goal")
        if goal is not None:
            _choice(goal, ATTACK_GOALS, "attack_goal")
        goals = _req(d, "goals", list, w)
        if not goals or not all(isinstance(g, str) and g for g in goals):
            raise ValidationError("must be a non-empty list of goal strings", field="goals")
        agents = _req(d, "agents", list, w)
        agent_ids = set()
        for i, a in enumerate(agents):
            agent_ids.add(_req(a, "id", str, f"agents[{i}]."))
            _req(a, "role", str, f"agents[{i}].")
        ledger = tuple(LedgerEntry.from_dict(e, f"ledger[{i}].")
                       for i, e in enumerate(_req(d, "ledger", list, w)))
        plans = _req(d, "plans", dict, w)

        def steps(raw: list[Any], where: str) -> tuple[PlanStep, ...]:
            out = []
            for i, s in enumerate(raw):
                step = PlanStep.from_dict(s, f"{where}[{i}].")
                if step.agent not in agent_ids:
                    raise ValidationError(f"unknown agent '{step.agent}'",
                                          field=f"{where}[{i}].agent")
                _session(step.session, len(goals), f"{where}[{i}].session")
                out.append(step)
            return tuple(out)

        def plan(name: str) -> tuple[PlanStep, ...]:
            return steps(_req(plans, name, list, "plans."), f"plans.{name}")

        prefill = steps(d.get("prefill") or [], "prefill")
        entry = agents[0]["id"] if agents else None
        for i, step in enumerate(prefill):
            if step.tool == "final_answer" or TOOLS[step.tool].kind != "read":
                raise ValidationError(f"a prefilled step must be a read, not '{step.tool}'",
                                      field=f"prefill[{i}].tool")
            if step.agent != entry:
                raise ValidationError(f"a prefilled step is taken for the entry agent "
                                      f"'{entry}', not '{step.agent}'",
                                      field=f"prefill[{i}].agent")
        tb = _req(d, "tool_boundary", dict, w)
        for i, t in enumerate(_req(tb, "allowed_tools", list, "tool_boundary.")):
            _tool(t, f"tool_boundary.allowed_tools[{i}]")
        for t in _req(tb, "targets", dict, "tool_boundary."):
            _tool(t, f"tool_boundary.targets.{t}")
        oracle = _req(d, "oracle", dict, w)
        for i, r in enumerate(_req(oracle, "required", list, "oracle.")):
            _tool(_req(r, "tool", str, f"oracle.required[{i}]."), f"oracle.required[{i}].tool")
            for fname, clause in _req(r, "args", dict, f"oracle.required[{i}].").items():
                where = f"oracle.required[{i}].args.{fname}"
                _choice(_req(clause, "op", str, f"{where}."), PREDICATE_OPS, f"{where}.op")
            if "session" in r:
                _session(r["session"], len(goals), f"oracle.required[{i}].session")
        recovery = d.get("recovery")
        if recovery is not None and "session" in recovery.get("follow_up", {}):
            _session(recovery["follow_up"]["session"], len(goals),
                     "recovery.follow_up.session")
        init = _req(d, "initial_state", dict, w)
        for key in ("principal", "emails", "documents", "contacts", "calendar", "crm", "memory",
                    "agent_messages"):
            _req(init, key, (list, dict), "initial_state.")
        return cls(
            id=_scenario_id(_req(d, "id", str, w)), suite=_req(d, "suite", str, w),
            family=_req(d, "family", str, w), cluster_id=_req(d, "cluster_id", str, w),
            stage=stage, domain=_choice(_req(d, "domain", str, w), DOMAINS, "domain"),
            topology=_choice(_req(d, "topology", str, w), TOPOLOGIES, "topology"),
            memory_mode=_choice(_req(d, "memory_mode", str, w), MEMORY_MODES, "memory_mode"),
            carrier=carrier, attack_goal=goal, goals=tuple(goals), agents=tuple(agents),
            initial_state=init, untrusted=tuple(_req(d, "untrusted", list, w)),
            canaries=tuple(_req(d, "canaries", list, w)), ledger=ledger, tool_boundary=tb,
            authorization=_req(d, "authorization", dict, w),
            memory_high_risk=_req(d, "memory_high_risk", bool, w), oracle=oracle,
            attacker_goal=d.get("attacker_goal"), recovery=recovery,
            benign_plan=plan("benign"), attacker_plan=plan("attacker"),
            attack_steps=plan("attack"), prefill=prefill, meta=dict(d.get("meta", {})),
            record=d,
        )
