"""Gateway: delegation binding, CIM normalization and event emission for every tool call."""

from containmentbench.gateway.gateway import HINT_KEYS, Delegation, Gateway
from containmentbench.gateway.normalize import normalize

__all__ = ["HINT_KEYS", "Delegation", "Gateway", "normalize"]
