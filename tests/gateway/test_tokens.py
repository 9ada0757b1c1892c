"""Binding integrity under attack (I5, App. D): several principals on one gateway, HMAC
delegation tokens; forged, replayed, expired and cross-principal tokens leave the call
unbound with their misbinding signal, and a valid one binds."""

from __future__ import annotations

import pytest

from containmentbench.errors import BenchError
from containmentbench.gateway import Gateway
from containmentbench.gateway.tokens import CROSS, EXPIRED, FORGED, REPLAYED, TokenAuthority
from containmentbench.sandbox.world import World

KEY = b"k" * 32


@pytest.fixture
def gw(smoke):
    world = World.from_spec(smoke[0].initial_state)
    return Gateway("r1", "alice", world, "corp.local", authority=TokenAuthority(KEY))


def _call(g, token, principal="alice", inst="a#1", tick=3):
    return g.bind_token(token, principal, "agent", inst, "read_messages", {}, tick)


def test_valid_token_binds_to_its_principal(gw):
    a = gw.mint("agent", "a#1", None, 0)
    b = gw.mint("agent", "b#1", None, 0, principal_id="bob")
    out = _call(gw, gw.token(a, 10))
    assert out["binding"] == "bound" and out["delegation_id"] == a.delegation_id
    assert out["principal_id"] == "alice" and out["integrity"] is None
    out = _call(gw, gw.token(b, 10), principal="bob", inst="b#1")
    assert out["binding"] == "bound" and out["principal_id"] == "bob"


def test_forged_tokens(gw):
    a = gw.mint("agent", "a#1", None, 0)
    good = gw.token(a, 10)
    other = Gateway("r1", "alice", gw.world, "corp.local",
                    authority=TokenAuthority(b"another key, 32 bytes long......"))
    other.delegations = gw.delegations
    v, payload, mac = good.split(".")
    tampered = f"{v}.{payload[:-2]}AA.{mac}"
    for bad in (other.token(a, 10), tampered, "v1.x.y", a.delegation_id, None):
        out = _call(gw, bad)
        assert out["binding"] == "unbound" and out["delegation_id"] is None
        assert out["integrity"] == [FORGED]


def test_expired_replayed_and_cross_principal(gw):
    a = gw.mint("agent", "a#1", None, 0)
    tok = gw.token(a, 5)
    assert _call(gw, tok, tick=5)["binding"] == "bound"
    assert _call(gw, tok, tick=6)["integrity"] == [EXPIRED]
    # captured and replayed by another runtime, or after the delegation closed
    assert _call(gw, tok, inst="mallory#9")["integrity"] == [REPLAYED]
    # bob's channel presenting alice's valid token
    b = gw.mint("agent", "a#1", None, 0, principal_id="bob")
    assert _call(gw, gw.token(b, 5), principal="alice")["integrity"] == [CROSS]
    assert _call(gw, gw.token(b, 5), principal="alice")["binding"] == "unbound"
    gw.authority.close(a.delegation_id)
    assert _call(gw, tok)["integrity"] == [REPLAYED]


def test_lineage_stays_within_a_principal(gw):
    a = gw.mint("agent", "a#1", None, 0)
    with pytest.raises(ValueError):
        gw.mint("agent", "c#1", a.delegation_id, 1, principal_id="bob")
    with pytest.raises(BenchError):
        TokenAuthority(b"short")


def test_cli_decodes_tokens_and_refuses_one_signed_with_another_key(gw, tmp_path, capsys):
    from containmentbench.cli.main import main

    a = gw.mint("agent", "a#1", None, 0)
    c = gw.mint("worker", "w#1", a.delegation_id, 2)
    other = TokenAuthority(b"o" * 32)
    key = tmp_path / "key"
    key.write_bytes(KEY + b"\n")
    good = tmp_path / "good.txt"
    good.write_text(f"# presented tokens\n{gw.token(a, 10)}\n\n{gw.token(c, 5, nonce='n7')}\n")
    out = tmp_path / "claims.json"
    assert main(["cim", "tokens", "--key-file", str(key), "--tokens", str(good), "--json",
                 "--out", str(out)]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["line"], r["principal_id"], r["delegation_id"], r["parent_id"],
             r["agent_instance"], r["expires_tick"], r["nonce"]) for r in rows] == [
        (2, "alice", a.delegation_id, None, "a#1", 10, "0"),
        (4, "alice", c.delegation_id, a.delegation_id, "w#1", 7, "n7")]
    assert json.loads(out.read_text())["tokens"] == rows
    foreign = other.issue(gw.authority.claims(gw.token(a, 10)))  # same claims, other key
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{gw.token(a, 10)}\n{foreign}\n")
    out2 = tmp_path / "claims2.json"
    assert main(["cim", "tokens", "--key-file", str(key), "--tokens", str(bad),
                 "--out", str(out2)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.txt:2" in err and "field 'token'" in err
    assert "another key" in err and not out2.exists()
