"""The one gateway every tool call goes through (paper 002 §6 and Appendix C).

Its four logical functions (App. C.2): interception (the runtime hands it every call),
context binding (it mints delegation ids bound to the authenticated principal, links child
delegations to their parent when a supervisor delegates or a peer hands off, and validates the
id an agent acts under), semantic normalization (``normalize``), and emission (it returns the
gateway-bound fields that go on the trace event). Gateway-bound fields are kept apart from
agent-provided hints: a hint that conflicts with a bound value is recorded as an integrity
signal (App. C.3), and a call without valid delegation context is emitted as ``unbound``,
never dropped (§6 contract (d)).

Several principals can share one gateway: ``mint`` takes the principal it binds (default
the rollout's), ``bind`` the caller's authenticated principal, and with a
``TokenAuthority`` (tokens.py) agents present HMAC-signed delegation tokens instead of bare
ids; a forged, expired, replayed or cross-principal token is a misbinding signal and leaves
the call unbound (I5, App. D "identifier spoofing").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from containmentbench.canonical import canonical_json, short_id
from containmentbench.gateway.normalize import LABELS, normalize
from containmentbench.gateway.tokens import Claims, TokenAuthority
from containmentbench.sandbox.world import World

# Argument names an agent may use to assert delegation context; they are hints, never bound.
HINT_KEYS = ("delegation_id", "principal", "principal_id", "on_behalf_of", "agent_id")
READ_VERBS = ("read", "search", "enumerate")


@dataclass(frozen=True, slots=True)
class Delegation:
    delegation_id: str
    parent_id: str | None
    principal_id: str
    agent_id: str
    agent_instance: str
    minted_tick: int


class Gateway:
    """Delegation registry and binder for one rollout."""

    __slots__ = ("authority", "delegations", "org_domain", "principal_id", "read_high",
                 "rollout_id", "world")

    def __init__(self, rollout_id: str, principal_id: str, world: World, org_domain: str,
                 authority: TokenAuthority | None = None):
        self.rollout_id = rollout_id
        self.principal_id = principal_id
        self.world = world
        self.org_domain = org_domain
        self.delegations: dict[str, Delegation] = {}
        self.authority = authority
        # highest sensitivity each delegation has read: the label of what it composes
        # (normalize.py); a child starts from its parent's (the material it was handed)
        self.read_high: dict[str, str] = {}

    def mint(self, agent_id: str, agent_instance: str, parent_id: str | None,
             tick: int, principal_id: str | None = None) -> Delegation:
        """Mint a delegation for an agent instance, bound to the rollout's principal.

        A child (``parent_id`` set) must descend from a delegation this gateway minted; the
        lineage stays a DAG because ids are only ever minted here, after their parent."""
        if parent_id is not None and parent_id not in self.delegations:
            raise ValueError(f"parent delegation {parent_id} was not minted by this gateway")
        principal = principal_id or self.principal_id
        if parent_id is not None and self.delegations[parent_id].principal_id != principal:
            raise ValueError(f"parent delegation {parent_id} belongs to another principal")
        did = "dlg-" + short_id(self.rollout_id, len(self.delegations), agent_instance, n=16)
        d = Delegation(did, parent_id, principal, agent_id, agent_instance, tick)
        self.delegations[did] = d
        if parent_id is not None and parent_id in self.read_high:
            self.read_high[did] = self.read_high[parent_id]
        return d

    def _raise_high(self, did: str, label: str) -> None:
        if label in LABELS and (did not in self.read_high
                                or LABELS.index(label) > LABELS.index(self.read_high[did])):
            self.read_high[did] = label

    def token(self, d: Delegation, ttl_ticks: int, nonce: str = "0") -> str:
        """The signed token an agent presents for ``d`` (needs a TokenAuthority)."""
        if self.authority is None:
            raise ValueError("this gateway has no token authority")
        return self.authority.issue(Claims(d.principal_id, d.delegation_id, d.parent_id,
                                           d.agent_instance, d.minted_tick + ttl_ticks, nonce))

    def bind_token(self, token: Any, principal_id: str, agent_id: str, agent_instance: str,
                   tool: str, args: dict[str, Any], tick: int,
                   hints: dict[str, Any] | None = None) -> dict[str, Any]:
        """``bind`` for a call that presents a token on ``principal_id``'s authenticated
        channel; an invalid token leaves the call unbound with its misbinding signal."""
        if self.authority is None:
            raise ValueError("this gateway has no token authority")
        claims, signal = self.authority.verify(token, principal_id=principal_id,
                                               agent_instance=agent_instance, tick=tick)
        if signal is not None:
            out = self.bind(None, agent_id, agent_instance, tool, args, hints,
                            principal_id=principal_id)
            out["integrity"] = [signal]
            return out
        assert claims is not None
        return self.bind(claims.delegation_id, agent_id, agent_instance, tool, args, hints,
                         principal_id=principal_id)

    def bind(self, delegation_id: str | None, agent_id: str, agent_instance: str, tool: str,
             args: dict[str, Any], hints: dict[str, Any] | None = None,
             principal_id: str | None = None) -> dict[str, Any]:
        """Gateway-bound fields for one call (validation, normalization, integrity);
        ``principal_id`` is the caller's authenticated principal (default the rollout's)."""
        integrity: list[str] = []
        caller = principal_id or self.principal_id
        d = self.delegations.get(delegation_id) if delegation_id else None
        if d is None:
            binding = "unbound"
            integrity.append("unbound:no_valid_delegation")
        elif d.principal_id != caller or d.agent_instance != agent_instance:
            binding = "unbound"
            integrity.append("misbinding:delegation_not_issued_to_agent")
        else:
            binding = "bound"
        clean_hints = {}
        for key in HINT_KEYS:
            if hints and key in hints:
                clean_hints[key] = hints[key]
        if "delegation_id" in clean_hints and d is not None and \
                clean_hints["delegation_id"] != d.delegation_id:
            integrity.append("hint_conflict:delegation_id")
        for key in ("principal", "principal_id", "on_behalf_of"):
            if key in clean_hints and clean_hints[key] != caller:
                integrity.append(f"hint_conflict:{key}")
        if "agent_id" in clean_hints and clean_hints["agent_id"] != agent_id:
            integrity.append("hint_conflict:agent_id")
        out = normalize(tool, args, self.world, self.org_domain,
                        self.read_high.get(d.delegation_id) if d else None)
        if binding == "bound" and d is not None and out["action_semantic"] in READ_VERBS:
            self._raise_high(d.delegation_id, out["sensitivity_label"])
        out.update({
            "delegation_id": d.delegation_id if d else None,
            "delegation_parent_id": d.parent_id if d else None,
            "principal_id": d.principal_id if d and binding == "bound" else
            (caller if d else None),
            "binding": binding,
            "agent_hints": canonical_json(clean_hints) if clean_hints else None,
            "integrity": integrity or None,
        })
        return out
