"""Runtime policies: the ``Policy`` interface, the seven defenses, and loading from config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.policies import defenses as _defenses  # noqa: F401  (registers classes)
from containmentbench.policies.base import (
    ALLOW,
    BLOCK,
    CONFIRM,
    REGISTRY,
    Decision,
    Policy,
    PolicyConfig,
    PrefixView,
    Proposal,
)

DEFENSES = ("none", "prompt_only", "structured_guard", "tool_boundary", "taint_only_v1",
            "intent_ledger_v2", "rollback_v2")


def policy_from_mapping(entry: dict[str, Any]) -> Policy:
    name = entry.get("name")
    if name not in REGISTRY:
        raise BenchError(f"unknown defense '{name}' (known: {', '.join(sorted(REGISTRY))})",
                         field="defense")
    cfg = PolicyConfig(name=name, method_version=str(entry["method_version"]),
                       family=str(entry.get("family", name)),
                       prompt_guidance=entry.get("prompt_guidance"),
                       params=dict(entry.get("params") or {}))
    return REGISTRY[name](cfg)


def load_policy(name: str, defenses: dict[str, Any] | None = None,
                config_dir: Path | None = None) -> Policy:
    """Build a policy from its configuration (the ``defenses`` group), not from constants."""
    if defenses is None:
        from containmentbench.config.loader import load_defenses
        defenses = load_defenses(config_dir)
    if name not in defenses:
        raise BenchError(f"unknown defense '{name}' (configured: {', '.join(defenses)})",
                         field="defense")
    return policy_from_mapping(dict(defenses[name]))


__all__ = ["ALLOW", "BLOCK", "CONFIRM", "DEFENSES", "REGISTRY", "Decision", "Policy",
           "PolicyConfig", "PrefixView", "Proposal", "load_policy", "policy_from_mapping"]
