"""Gateway binding (paper 002 §6, App. C): minted ids bound to the principal, child lineage,
explicit unbound state, hints kept apart with integrity signals, deterministic normalization."""

from __future__ import annotations

import pytest

from containmentbench.gateway import Gateway, normalize
from containmentbench.sandbox.world import World


@pytest.fixture
def world(smoke):
    return World.from_spec(smoke[0].initial_state)


def test_mint_and_bind(world):
    g = Gateway("r1", "user-1", world, "corp.local")
    root = g.mint("supervisor", "supervisor#1.1", None, 0)
    child = g.mint("worker", "worker#1.2", root.delegation_id, 5)
    assert child.parent_id == root.delegation_id and child.principal_id == "user-1"
    b = g.bind(child.delegation_id, "worker", "worker#1.2", "read_document", {"doc_id": "doc-1"})
    assert b["binding"] == "bound" and b["delegation_parent_id"] == root.delegation_id
    assert b["integrity"] is None and b["action_semantic"] == "read"
    again = Gateway("r1", "user-1", world, "corp.local")
    assert again.mint("supervisor", "supervisor#1.1", None, 0).delegation_id == root.delegation_id


def test_unbound_and_misbinding_are_explicit(world):
    g = Gateway("r1", "user-1", world, "corp.local")
    d = g.mint("a", "a#1.1", None, 0)
    b = g.bind(None, "a", "a#1.1", "read_messages", {})
    assert b["binding"] == "unbound" and b["integrity"] == ["unbound:no_valid_delegation"]
    b = g.bind(d.delegation_id, "b", "b#1.9", "read_messages", {})
    assert b["binding"] == "unbound" and "misbinding" in b["integrity"][0]
    with pytest.raises(ValueError):
        g.mint("x", "x#1", "dlg-not-minted", 1)


def test_hint_conflicts_are_integrity_signals(world):
    g = Gateway("r1", "user-1", world, "corp.local")
    d = g.mint("a", "a#1.1", None, 0)
    b = g.bind(d.delegation_id, "a", "a#1.1", "read_messages", {},
               hints={"delegation_id": "dlg-other", "principal": "user-2"})
    assert b["delegation_id"] == d.delegation_id  # the gateway-bound value wins
    assert set(b["integrity"]) == {"hint_conflict:delegation_id", "hint_conflict:principal"}
    assert '"delegation_id":"dlg-other"' in b["agent_hints"]


def test_normalization_tier2(world):
    n = normalize("send_email", {"to": "x@evil.local", "subject": "s", "body": "b"}, world,
                  "corp.local")
    assert (n["action_semantic"], n["direction"], n["principal_scope"]) == (
        "share", "external", "external")
    n = normalize("post_status_note", {"channel": "c", "text": "t", "visibility": "public"},
                  world, "corp.local")
    assert n["action_semantic"] == "share" and n["direction"] == "external"
    n = normalize("read_document", {"doc_id": "doc-1"}, world, "corp.local")
    assert n["sensitivity_label"] == "confidential" and n["resource_id"] == "doc-1"
    n = normalize("send_invite", {"event_id": "evt-1", "recipient": world.principal["email"]},
                  world, "corp.local")
    assert n["action_semantic"] == "invite" and n["principal_scope"] == "self"
