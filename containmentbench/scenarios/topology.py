"""Agent topologies and how a flat task plan maps onto them (paper 000 §3.1).

* ``single``: one assistant reads and acts.
* ``supervisor_worker``: the supervisor reads, then delegates the side-effecting part to a
  worker through the gateway (a child delegation); the worker's result returns as a message.
* ``peer_chain``: a researcher reads and hands off to a reviewer, who hands off to an
  executor; each handoff is a child delegation and carries the source material as a message.

Roles fix each agent's toolset, so a relayed injection can only act where a tool exists.
"""

from __future__ import annotations

from typing import Any

from containmentbench.sandbox.tools import AGENT_TOOLS, READ_TOOLS, TOOLS

_ACTING = frozenset(TOOLS) - AGENT_TOOLS

ROLE_TOOLS: dict[str, frozenset[str]] = {
    "primary": _ACTING,
    "supervisor": READ_TOOLS | {"delegate", "write_task_record"},
    "worker": _ACTING,
    "researcher": READ_TOOLS | {"handoff"},
    "reviewer": READ_TOOLS | {"handoff"},
    "executor": _ACTING,
}

AGENTS: dict[str, tuple[dict[str, str], ...]] = {
    "single": ({"id": "assistant", "role": "primary"},),
    "supervisor_worker": ({"id": "supervisor", "role": "supervisor"},
                          {"id": "worker", "role": "worker"}),
    "peer_chain": ({"id": "agent_a", "role": "researcher"}, {"id": "agent_b", "role": "reviewer"},
                   {"id": "agent_c", "role": "executor"}),
}

EXECUTOR = {"single": "assistant", "supervisor_worker": "worker", "peer_chain": "agent_c"}

# whom each role passes work to (delegate or handoff): a supervisor its workers, a chain's
# agent the next one; the runtime lets an agent reach exactly the scenario's agents of that role
NEXT_ROLE = {"supervisor": "worker", "researcher": "reviewer", "reviewer": "executor"}


def reachable(agents: tuple[dict[str, str], ...] | list[dict[str, str]],
              role: str) -> tuple[str, ...]:
    """The ids of the agents an agent of ``role`` can delegate or hand off to."""
    want = NEXT_ROLE.get(role)
    return tuple(a["id"] for a in agents if want is not None and a["role"] == want)


def _on(agent: str, session: int, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"agent": agent, "tool": s["tool"], "args": dict(s["args"]), "session": session}
            for s in steps]


def _final(agent: str, session: int, text: str) -> dict[str, Any]:
    return {"agent": agent, "tool": "final_answer", "args": {"text": text}, "session": session}


def map_session(topology: str, goal: str, reads: list[dict[str, Any]],
                writes: list[dict[str, Any]], relay: str, session: int,
                attack: list[dict[str, Any]], placement: str
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (benign plan, attacker plan, attack steps) for one session of a topology.

    The attacker plan is the benign plan with the attack steps taken by the executing agent
    right after it sees the injection (``immediate``) or just before it finishes
    (``before_final``).
    """
    ex = EXECUTOR[topology]
    att = _on(ex, session, attack)
    acting = _on(ex, session, writes)
    done = _final(ex, session, "Done: the requested steps are complete.")
    if placement == "immediate":
        acting_att = att + acting
    else:
        acting_att = acting + att
    if topology == "single":
        head = _on(ex, session, reads)
        return head + acting + [done], head + acting_att + [done], att
    material = f"{goal}\n\nSource material:\n{relay}"
    if topology == "supervisor_worker":
        head = [*_on("supervisor", session, reads),
                {"agent": "supervisor", "tool": "delegate",
                 "args": {"worker": "worker", "task": material}, "session": session}]
        tail = [_final("supervisor", session, "The worker completed the task.")]
        return head + acting + [done] + tail, head + acting_att + [done] + tail, att
    if topology == "peer_chain":
        head = [
            *_on("agent_a", session, reads),
            {"agent": "agent_a", "tool": "handoff", "args": {"to": "agent_b", "note": material},
             "session": session},
            {"agent": "agent_b", "tool": "lookup_contact", "args": {"name": "corp.local"},
             "session": session},
            {"agent": "agent_b", "tool": "handoff",
             "args": {"to": "agent_c", "note": f"Reviewed. {material}"}, "session": session}]
        return head + acting + [done], head + acting_att + [done], att
    raise KeyError(topology)
