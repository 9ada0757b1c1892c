"""Authenticated delegation tokens: binding integrity under attack (paper 002 I5, App. C.3,
App. D "identifier spoofing").

A gateway serving several principals cannot trust a ``delegation_id`` an agent presents: it
must be bound to an authenticated principal and to its minting context. ``TokenAuthority``
issues, at minting, a token ``v1.<payload>.<mac>`` with ``mac = HMAC-SHA256(key, payload)``
over the principal, the delegation id, its parent, the agent instance it was issued to, an
expiry (logical tick) and a nonce. ``verify`` checks a presented token against the caller's
authenticated channel and returns the claims, or the misbinding signal that makes the call
``unbound`` (never dropped, §6 (d)):

* ``misbinding:forged_token`` — not a token of this authority: malformed, or its MAC does not
  verify (tampered claims, or signed with another key);
* ``misbinding:expired_token`` — its expiry is before the call;
* ``misbinding:replayed_token`` — a valid token presented by another agent instance than the
  one it was issued to, or after its delegation was closed (the agent finished);
* ``misbinding:cross_principal`` — a valid token of one principal presented on another
  principal's authenticated channel.

Checks run in that order: a token whose MAC fails says nothing trustworthy about its claims.
The claims of a token whose MAC holds are type-checked after it (:func:`check_claims`): six
values, the ids strings, the parent a string or null, the expiry an integer tick within
64 bits; anything else (a ``null`` or ``1e400`` expiry ended in a traceback) is no token of
this authority, ``misbinding:forged_token`` for the gateway and one line for ``cim tokens``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from containmentbench.errors import BenchError

VERSION = "v1"
FORGED, EXPIRED, REPLAYED, CROSS = ("misbinding:forged_token", "misbinding:expired_token",
                                    "misbinding:replayed_token", "misbinding:cross_principal")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Claims:
    principal_id: str
    delegation_id: str
    parent_id: str | None
    agent_instance: str
    expires_tick: int
    nonce: str


class TokenAuthority:
    """Issues and verifies delegation tokens under one secret key."""

    __slots__ = ("_key", "closed")

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise BenchError("a token key needs at least 16 bytes", field="key")
        self._key = key
        self.closed: set[str] = set()

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def issue(self, c: Claims) -> str:
        payload = json.dumps([c.principal_id, c.delegation_id, c.parent_id, c.agent_instance,
                              c.expires_tick, c.nonce], separators=(",", ":")).encode()
        return f"{VERSION}.{_b64(payload)}.{_b64(self._mac(payload))}"

    def close(self, delegation_id: str) -> None:
        """The delegation finished: its token is no longer accepted (replay)."""
        self.closed.add(delegation_id)

    def verify(self, token: Any, *, principal_id: str, agent_instance: str, tick: int
               ) -> tuple[Claims | None, str | None]:
        """(claims, None) for a token valid on this channel, else (None, signal)."""
        claims = self._decode(token)
        if claims is None:
            return None, FORGED
        if tick > claims.expires_tick:
            return None, EXPIRED
        if claims.agent_instance != agent_instance or claims.delegation_id in self.closed:
            return None, REPLAYED
        if claims.principal_id != principal_id:
            return None, CROSS
        return claims, None

    def claims(self, token: Any) -> Claims | None:
        """The claims of a token this authority signed (no channel checks), else None."""
        return self._decode(token)

    def why_not(self, token: Any) -> str:
        """Why :meth:`claims` refuses ``token``, in words (empty: it does not)."""
        payload, why = self._payload(token)
        if payload is None:
            return why
        return check_claims(payload)[1]

    def _payload(self, token: Any) -> tuple[bytes | None, str]:
        """The signed payload of ``token`` (None, and why: not a token of this key)."""
        if not isinstance(token, str) or token.count(".") != 2:
            return None, "not a token (v1.<payload>.<mac>)"
        version, p64, m64 = token.split(".")
        try:
            payload, mac = _unb64(p64), _unb64(m64)
        except (ValueError, TypeError):
            return None, "not a token (its parts are not base64)"
        if version != VERSION or not hmac.compare_digest(mac, self._mac(payload)):
            return None, "not signed with this key (forged, tampered or signed with another key)"
        return payload, ""

    def _decode(self, token: Any) -> Claims | None:
        payload, _ = self._payload(token)
        return check_claims(payload)[0] if payload is not None else None


_MAX_TICK = (1 << 63) - 1


def check_claims(payload: bytes) -> tuple[Claims | None, str]:
    """The claims of a signed payload, type-checked (None, and which claim is wrong)."""
    try:
        doc = json.loads(payload)
    except (ValueError, RecursionError):
        return None, "its signed claims are not JSON"
    if not isinstance(doc, list) or len(doc) != 6:
        return None, "its signed claims are not the six values of a token"
    p, d, parent, inst, exp, nonce = doc
    for name, value in (("principal_id", p), ("delegation_id", d), ("agent_instance", inst),
                        ("nonce", nonce)):
        if not isinstance(value, str):
            return None, f"its claim {name} is not a string"
    if parent is not None and not isinstance(parent, str):
        return None, "its claim parent_id is neither a string nor null"
    if isinstance(exp, bool) or not isinstance(exp, int) or not 0 <= exp <= _MAX_TICK:
        return None, "its claim expires_tick is not an integer tick (0 to 2**63-1)"
    return Claims(p, d, parent, inst, exp, nonce), ""
