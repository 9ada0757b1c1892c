"""What a rollout runs under and what it keeps per agent: the runtime limits
(:class:`RuntimeConfig`), the rollout's identity (:class:`RolloutSpec`), one agent instance's
context and trace position (:class:`AgentRun`), and the trusted reference text field-level
taint is measured against (:func:`trusted_index`). The episode state machine that uses them is
``episode.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from containmentbench.canonical import canonical_json
from containmentbench.parser import ParserConfig
from containmentbench.runtime.provenance import TextIndex
from containmentbench.scenarios.model import Scenario


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    max_steps: int = 60                 # model calls per rollout (the step limit)
    max_agent_turns: int = 24           # model calls per agent instance
    max_consecutive_errors: int = 3     # format/invalid-tool errors before an agent gives up
    max_calls_per_turn: int = 1         # as in the paper; extra calls are recorded as dropped
    max_identical_calls: int = 0        # stop an agent at its Nth identical call; 0 = never
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0                  # recorded (decoding); the backend applies it
    seed_policy: str = "replicates"     # recorded (config/decoding.py)
    parser: ParserConfig | None = None
    tool_mode: str = "prompt"           # prompt | native | constrained (models.base)
    tools_offered: str = "all"          # all | domain (scenarios/toolsets.py)

    def decoding(self) -> str:
        """The decoding block every rollout row records (config/decoding.py)."""
        return canonical_json({"temperature": self.temperature, "top_p": self.top_p,
                               "max_tokens": self.max_tokens, "seed_policy": self.seed_policy})


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    rollout_id: str
    study: str
    model: str
    backend: str
    defense: str
    seed: int
    agent_profile: str | None


@dataclass(slots=True)
class AgentRun:
    """One agent instance: its context, delegation and trace position."""

    agent_id: str
    role: str
    instance: str
    delegation_id: str | None
    delegation_parent_id: str | None
    principal_id: str
    tools: tuple[str, ...]
    messages: list[dict[str, str]]
    inbox: list[tuple[int, str]]          # observation nodes since the last model call
    parent: AgentRun | None = None
    waiting_call: str | None = None       # the delegate call whose result this agent awaits
    last_call: int | None = None          # last model_call node (context carry-over)
    turns: int = 0
    errors: int = 0
    done: bool = False
    tainted_text: TextIndex = field(default_factory=TextIndex)
    sim: dict[str, Any] = field(default_factory=dict)
    calls_seen: dict[str, int] = field(default_factory=dict)  # canonical call -> times proposed
    attach_next: bool = False             # a prefill: the next observation joins the request
    targets: tuple[str, ...] = ()         # the agent ids it can delegate or hand off to


_TRUSTED_CACHE: dict[str, TextIndex] = {}


def trusted_index(s: Scenario) -> TextIndex:
    """Trusted reference text: the user goals and the ledger's values."""
    idx = _TRUSTED_CACHE.get(s.hash)
    if idx is None:
        texts = [*s.goals, canonical_json([e.to_dict() for e in s.ledger])]
        idx = TextIndex(tuple(texts))
        if len(_TRUSTED_CACHE) > 4096:
            _TRUSTED_CACHE.clear()
        _TRUSTED_CACHE[s.hash] = idx
    return idx
