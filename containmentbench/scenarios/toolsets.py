"""Tools offered per role: a study factor (``study.tools_offered``).

``all`` (the default, and what the paper studies run): every agent is offered its role's whole
toolset (``topology.ROLE_TOOLS``: 22 tools for an acting agent), whatever the task's domain.
``domain``: each agent is offered the part of its role's toolset that belongs to the
scenario's domain, as a deployed assistant for that domain would be:

* the domain's own tools (:data:`DOMAIN_TOOLS`: reading and acting on mail, documents, or the
  calendar and CRM);
* what every domain shares: the task record and the contact directory;
* the persistent-memory tools when the scenario's memory is persistent (a session-memory agent
  has no memory to read back in a later session);
* the role's agent tool (``delegate`` for a supervisor, ``handoff`` along a chain).

Tool schemas are most of a prompt (22 schemas, about 1,250 tokens, against 28-60 output tokens
per call), so the mode decides most of a CPU study's prefill cost. It changes what the model
is offered, so it is part of the shard and run keys and recorded in every rollout row, and two
modes are never pooled.

A suite can be run in ``domain`` mode only if every step of every reference plan (benign,
attacker and the attack steps) is offered to the agent that takes it: otherwise a task, or the
attack the positive control needs, would be impossible by construction. The runtime's
prefilled read (exposed suites) is the runtime's step, not the agent's, and need not be
offered. :func:`check_suite` refuses a suite that cannot provide a mode with one line naming
the first scenario, step and tool.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.sandbox.tools import AGENT_TOOLS
from containmentbench.scenarios.topology import ROLE_TOOLS

MODES = ("all", "domain")

#: the tools of each domain's own work (read and act)
DOMAIN_TOOLS: dict[str, frozenset[str]] = {
    "email": frozenset({"search_email", "read_email", "draft_email", "send_email"}),
    "document": frozenset({"search_documents", "read_document", "share_document",
                           "post_status_note"}),
    "calendar_crm": frozenset({"crm_lookup", "list_calendar", "create_event", "send_invite",
                               "update_crm"}),
}
#: offered in every domain
SHARED_TOOLS = frozenset({"write_task_record", "lookup_contact"})
#: offered when the scenario's memory is persistent
MEMORY_TOOLS = frozenset({"memory_read", "memory_list", "memory_write", "memory_scrub",
                          "memory_quarantine"})


def check_mode(mode: str, field: str = "study.tools_offered") -> str:
    if mode not in MODES:
        raise BenchError(f"unknown tools-offered mode '{mode}' (known: {', '.join(MODES)})",
                         field=field)
    return mode


def offered(role: str, domain: str, memory_mode: str, mode: str) -> tuple[str, ...]:
    """The tools an agent of ``role`` is offered in a scenario of ``domain`` (sorted: the order
    of the schemas in its prompt)."""
    tools = ROLE_TOOLS[role]
    if mode == "domain":
        keep = DOMAIN_TOOLS[domain] | SHARED_TOOLS | AGENT_TOOLS
        if memory_mode == "persistent":
            keep |= MEMORY_TOOLS
        tools = tools & keep
    elif mode != "all":
        check_mode(mode)
    return tuple(sorted(tools))


def missing_step(scenario: Any, mode: str) -> tuple[str, str, str] | None:
    """The first reference-plan step whose tool ``mode`` does not offer to the agent that
    takes it, as (plan, agent, tool); None when every step is offered."""
    roles = {a["id"]: a["role"] for a in scenario.agents}
    for plan, steps in (("benign", scenario.benign_plan), ("attacker", scenario.attacker_plan),
                        ("attack", scenario.attack_steps)):
        for step in steps:
            if step.tool == "final_answer":
                continue
            role = roles.get(step.agent)
            if role is None:  # attack steps name the executing agent of the topology
                continue
            if step.tool not in offered(role, scenario.domain, scenario.memory_mode, mode):
                return plan, step.agent, step.tool
    return None


def check_suite(scenarios: Iterable[Any], mode: str, suite: str) -> None:
    """Refuse (one line, exit 2) a suite whose plans need a tool ``mode`` does not offer."""
    check_mode(mode)
    if mode == "all":
        return
    for s in scenarios:
        gap = missing_step(s, mode)
        if gap is not None:
            plan, agent, tool = gap
            raise BenchError(
                f"suite '{suite}' cannot offer '{mode}' tools: scenario {s.id} ({s.domain}, "
                f"{s.memory_mode} memory) needs {tool} for agent {agent} in its {plan} plan, "
                f"which that mode does not offer (use tools_offered=all, or a suite built for "
                f"it such as exposed_real)", field="study.tools_offered")
