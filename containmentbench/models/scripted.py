"""Scripted replay backend: emits a scenario's reference plan verbatim as strict JSON.

This is the mechanism of ``scenarios check`` (like AgentDojo's ground-truth check): each
agent instance replays its own steps of the benign or the attacker plan, in order, through
the real parser, gateway, policy and sandbox, so the trace contract is exercised without any
model. Option ``plan``: ``benign`` (default) or ``attacker``.
"""

from __future__ import annotations

import json
from typing import Any

from containmentbench.models.base import (
    BackendConfig,
    Completion,
    GenerationRequest,
    defense_echo,
)


class ScriptedBackend:
    name = "scripted"
    seed_supported = True

    def __init__(self, config: BackendConfig) -> None:
        self.plan = config.options.get("plan", "benign")
        if self.plan not in ("benign", "attacker"):
            raise ValueError(f"plan must be benign or attacker, got {self.plan!r}")

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        return [defense_echo(r) or self._next(r) for r in requests]

    def close(self) -> None:
        pass

    def _next(self, req: GenerationRequest) -> Completion:
        s, a, _spec = req.sim
        st: dict[str, Any] = a.sim
        if "queue" not in st:
            session = int(a.instance.split("#", 1)[1].split(".", 1)[0])
            plan = s.attacker_plan if self.plan == "attacker" and s.attacker_plan else \
                s.benign_plan
            st["queue"] = [x for x in plan if x.agent == a.agent_id and x.session == session]
        if not st["queue"]:
            return Completion(json.dumps({"final_answer": "Done."}))
        step = st["queue"].pop(0)
        if step.tool == "final_answer":
            text = json.dumps({"final_answer": step.args.get("text", "Done.")})
        else:
            text = json.dumps({"tool": step.tool, "arguments": step.args}, sort_keys=True)
        return Completion(text, completion_tokens=len(text) // 4)
