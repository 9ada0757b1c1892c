"""The policy interface: propose -> authorize -> (confirm) -> precommit -> commit.

A policy sees one proposal at proposal time together with the prefix trace visible then
(paper 000 §5.4: authorization is evaluated at k(q), never after the rollout) and the trusted
scenario metadata (ledger, tool boundary, canaries). It returns a :class:`Decision` with a
stable rule id and the evidence it used. Policies are pure functions of their inputs, so the
same proposal on the same prefix always gets the same decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from containmentbench.canonical import sha256_json
from containmentbench.scenarios.model import Scenario

ALLOW, BLOCK, CONFIRM = "allow", "block", "confirm"


@dataclass(frozen=True, slots=True)
class Proposal:
    """A parsed, valid tool call about to be authorized."""

    tool: str
    args: Mapping[str, Any]
    agent_id: str
    session: int
    seq: int                          # the proposal node in the trace
    call_id: str
    high_risk: bool                   # HighRisk(q), paper 000 §4.4 / Table 7 row 3
    tainted: bool                     # q in T_{tau, <= k(q)} (prefix taint closure)
    labels: frozenset[str]
    tainted_fields: Mapping[str, bool]  # field-level taint: value derives from a tainted source


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: str                      # allow | block | confirm
    rule_id: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    ledger_match: bool | None = None
    rollback: tuple[str, ...] = ()    # commits to revert instead of executing (rollback path)


class PrefixView(Protocol):
    """Read-only view of the trace prefix visible at authorization time."""

    def commits(self) -> Sequence[Mapping[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    name: str
    method_version: str
    family: str
    prompt_guidance: str | None
    params: Mapping[str, Any]

    def canonical(self) -> dict[str, Any]:
        return {"name": self.name, "method_version": self.method_version, "family": self.family,
                "prompt_guidance": self.prompt_guidance, "params": dict(self.params)}

    @property
    def policy_hash(self) -> str:
        """sha256 over the canonical configuration and method version."""
        return sha256_json(self.canonical())


class Policy:
    """Base class; subclasses implement :meth:`authorize` (and :meth:`confirm` if they use the
    confirmation path). ``name`` registers the class in :data:`REGISTRY`."""

    name: ClassVar[str] = ""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.params = dict(config.params)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.name:
            REGISTRY[cls.name] = cls

    @property
    def policy_hash(self) -> str:
        return self.config.policy_hash

    @property
    def method_version(self) -> str:
        return self.config.method_version

    @property
    def prompt_guidance(self) -> str | None:
        return self.config.prompt_guidance

    def authorize(self, q: Proposal, prefix: PrefixView, scenario: Scenario) -> Decision:
        raise NotImplementedError

    def confirm(self, q: Proposal, prefix: PrefixView, scenario: Scenario) -> tuple[bool, str]:
        """Resolve a confirmation request (the benchmark's synthetic user): (approved, rule)."""
        return False, "confirmation_not_committed"


REGISTRY: dict[str, type[Policy]] = {}
