"""What a deployment of one of our scenarios knows, in the defense API's terms.

The runtime builds a defense's context from these and from nothing else of the scenario
record: the tool inventory with its risk and parameter roles, the trusted intent ledger
(eq. 8-9), the task boundary (Table 7, column 1) and the data labels behind Leak(q) (§5.4).
The attack specification, the oracle, the stage and the other scenario labels stay here,
with the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from containmentbench.defense.context import (
    AgentInfo,
    Knowledge,
    Param,
    RolloutState,
    ToolCall,
    ToolInfo,
)
from containmentbench.sandbox.tools import TOOLS, is_high_risk, recipients_of
from containmentbench.sandbox.world import VISIBILITY_ORDER
from containmentbench.scenarios.ledger import authorizes, match, norm_field
from containmentbench.scenarios.model import LedgerEntry, Scenario
from containmentbench.scenarios.secrets import Secret, leaks_with, secrets_of

_VISIBILITY = tuple(sorted(VISIBILITY_ORDER, key=VISIBILITY_ORDER.__getitem__))


def tool_infos(memory_high_risk: bool) -> Mapping[str, ToolInfo]:
    """The sandbox's tools as a deployment declares them (HighRisk(q), §4.4)."""
    return _TOOL_INFOS[memory_high_risk]


def _infos(memory_high_risk: bool) -> dict[str, ToolInfo]:
    out = {}
    for name, spec in TOOLS.items():
        params = tuple(Param(p.name, p.type, p.role, p.required, p.description,
                             _VISIBILITY if p.role == "visibility" else ())
                       for p in spec.params)
        out[name] = ToolInfo(name, spec.description, spec.kind,
                             is_high_risk(name, memory_high_risk), params)
    return out


_TOOL_INFOS = {flag: MappingProxyType(_infos(flag)) for flag in (False, True)}


class ScenarioLedger:
    """The trusted intent ledger I_s (eq. 8) with eq. 9's match and §5.4's Expand."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Sequence[LedgerEntry]) -> None:
        self._entries = tuple(entries)

    @property
    def entries(self) -> tuple[dict[str, Any], ...]:
        return tuple(e.to_dict() for e in self._entries)

    @property
    def actions(self) -> frozenset[str]:
        return frozenset(e.action for e in self._entries)

    def match(self, tool: str, args: Mapping[str, Any]) -> int | None:
        entry = match(tool, args, self._entries)
        return None if entry is None else self._entries.index(entry)

    def expand(self, call: ToolCall, matched: int | None) -> list[str]:
        """Expand(q, I_s, G_{tau,<=k(q)}) of §5.4: tainted authority fields whose value the
        matched (else any same-action) entry does not authorize; ``action`` when a tainted
        proposal's action is in no entry at all."""
        spec = TOOLS[call.tool]
        entries = [self._entries[matched]] if matched is not None else \
            [e for e in self._entries if e.action == call.tool]
        out: list[str] = []
        if not entries and call.tainted:
            out.append("action")  # tainted context proposes an action no entry authorized
        for f, tainted in call.tainted_fields.items():
            if not tainted or f not in spec.authority_fields:
                continue
            value = call.args.get(f)
            if value in (None, "", []):
                continue
            # compared in the sandbox's forms (scenarios/ledger.py, sandbox/values.py)
            if not any(authorizes(e, f, value) for e in entries):
                out.append(f)
        return out


class ScenarioBoundary:
    """Tool and target constraints of the trusted task configuration (Table 7, column 1)."""

    __slots__ = ("_tb",)

    def __init__(self, tool_boundary: Mapping[str, Any]) -> None:
        self._tb = {"allowed_tools": list(tool_boundary.get("allowed_tools", [])),
                    "targets": {t: {f: list(v) for f, v in fields.items()}
                                for t, fields in (tool_boundary.get("targets") or {}).items()},
                    "max_visibility": dict(tool_boundary.get("max_visibility") or {})}

    @property
    def allowed_tools(self) -> frozenset[str]:
        return frozenset(self._tb["allowed_tools"])

    def constrains(self, tool: str, field: str) -> bool:
        # recipients are always constrained (an unlisted recipient field allows nobody);
        # other target ids and field names only where the task configuration lists them
        return TOOLS[tool].role(field) == "recipient" or field in self._tb["targets"].get(tool,
                                                                                         {})

    def disallowed(self, tool: str, field: str, value: Any) -> list[Any]:
        ok = {norm_field(tool, field, v) for v in self._tb["targets"].get(tool, {}).get(field, [])}
        values = value if isinstance(value, list) else [value]
        return [v for v in values if norm_field(tool, field, v) not in ok]

    def max_visibility(self, tool: str) -> str | None:
        return self._tb["max_visibility"].get(tool)


class ScenarioDataLabels:
    """The synthetic canaries and private-labelled documents and who is cleared for each
    (paper 000 eq. 5 / Table 23: SecretLeak), as a data-classification service."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Sequence[Secret]) -> None:
        self._secrets = tuple(secrets)

    def leak(self, tool: str, args: Mapping[str, Any]) -> bool:
        return leaks_with(self._secrets, tool, args, recipients_of(tool, args))


def knowledge_of(s: Scenario) -> Knowledge:
    """The deployment knowledge of a scenario: copies, never the record itself."""
    return Knowledge(ledger=ScenarioLedger(s.ledger), boundary=ScenarioBoundary(s.tool_boundary),
                     data_labels=ScenarioDataLabels(secrets_of(s)))


def agents_of(s: Scenario) -> tuple[AgentInfo, ...]:
    return tuple(AgentInfo(str(a["id"]), str(a["role"])) for a in s.agents)


_PARTS: dict[tuple[str, str], tuple[Scenario, tuple[Any, ...]]] = {}


def _parts(s: Scenario) -> tuple[Any, ...]:
    """A scenario's read-only parts of a defense's state (agents, tools, knowledge), built
    once per scenario object: every rollout of it (each defense and seed) shares them."""
    hit = _PARTS.get((s.suite, s.id))
    if hit is not None and hit[0] is s:
        return hit[1]
    parts = (agents_of(s), tool_infos(s.memory_high_risk), knowledge_of(s))
    if len(_PARTS) > 4096:
        _PARTS.clear()
    _PARTS[(s.suite, s.id)] = (s, parts)
    return parts


def scenario_state(s: Scenario) -> RolloutState:
    """The defense-side state of a rollout of ``s`` at its start (what the runtime builds;
    a defense's unit tests and ``defenses check`` build contexts over it)."""
    agents, tools, knowledge = _parts(s)
    return RolloutState([s.goals[0]], agents, tools, knowledge)
