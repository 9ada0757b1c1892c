"""The audit of an external benchmark's traces (paper 000 §6.4 adapter studies).

An adapter run records AgentDojo's own tools, not our sandbox's, so the audit policy's
sources and sinks are taken from the adapter's tool table (every AgentDojo sink; every tool
result can carry an injection vector, which the DCPG finds by content). The thresholds and
tiers are the given policy's. Its rollouts are AgentDojo tasks, not our scenarios: nothing can
replay them here, so their sinks without explicit evidence are "not probed" (a judge can
still be asked).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from containmentbench.audit.policy import AuditPolicy
from containmentbench.errors import BenchError


def adapter_name(config: dict[str, Any] | None) -> str | None:
    if not config:
        return None
    return ((config.get("study") or {}).get("adapter") or {}).get("name")


def adapter_policy(policy: AuditPolicy, name: str) -> AuditPolicy:
    """``policy`` with the adapter's sinks (no memory tools, no safe-control sinks)."""
    if name != "agentdojo":
        raise BenchError(f"adapter '{name}' has no audit policy", field="study.adapter.name")
    from containmentbench.adapters.agentdojo.tools import SINKS

    return replace(policy, sources=frozenset(), memory_write=frozenset(),
                   memory_read=frozenset(), sinks=frozenset(SINKS),
                   safe_control=frozenset(), file=f"{policy.file} (adapter {name})")
