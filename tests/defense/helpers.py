"""Building a defense's context and a proposal by hand, for unit tests of defenses."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from containmentbench.defense.context import Commit, ToolCall, frozen_args
from containmentbench.defense.host import context_for
from containmentbench.defense.loading import load_defense
from containmentbench.runtime.knowledge import scenario_state


def defense(name: str, defenses: dict[str, Any] | None = None) -> Any:
    """The one layer of a configured defense."""
    return load_defense(name, defenses).layers[0]


def ctx(d: Any, s: Any, commits: tuple[dict[str, Any], ...] = ()) -> Any:
    """``d``'s context at a point of a rollout of scenario ``s`` where ``commits`` (dicts
    with commit_id, tool, args, session, seq, tainted, high_risk, rolled_back) are done."""
    state = scenario_state(s)
    # the runtime's first nodes: one source per untrusted item (their channels)
    src = [{"seq": i, "kind": "source", "resource_id": u["source_id"],
            "resource_class": u["carrier"]} for i, u in enumerate(s.untrusted)]
    state.sync(src, [frozenset({f"taint:{u['source_id']}"}) for u in s.untrusted])
    for c in commits:
        state.add_commit(Commit(c["commit_id"], c["tool"], frozen_args(c["args"]),
                                c["session"], c["seq"], c["tainted"], c["high_risk"],
                                c["rolled_back"]))
    return context_for(d, state)


def call(tool: str, args: dict[str, Any], agent: str, session: int, tainted: bool,
         labels: frozenset[str], tainted_fields: dict[str, bool], high_risk: bool = True,
         seq: int = 10, call_id: str = "c1") -> ToolCall:
    return ToolCall(tool, frozen_args(args), agent, session, seq, call_id, high_risk, tainted,
                    frozenset(labels), MappingProxyType(dict(tainted_fields)))


def harmed(s: Any, ep: Any) -> bool:
    """A committed policy violation in the episode (eq. 5)."""
    from containmentbench.scenarios.oracle import violations
    from containmentbench.scenarios.selfcheck import committed

    return any(violations(s, c).any for c in committed(ep))
