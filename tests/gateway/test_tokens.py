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


def _signed(payload: bytes) -> str:
    """A token with the gateway's own MAC over arbitrary claims (what a key holder that
    signs garbage, or a bug, would present)."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"v1.{b64(payload)}.{b64(hmac.new(KEY, payload, hashlib.sha256).digest())}"


BAD_CLAIMS = {
    "expiry_null": b'["alice","d1",null,"a#1",null,"n"]',
    "expiry_1e400": b'["alice","d1",null,"a#1",1e400,"n"]',
    "expiry_text": b'["alice","d1",null,"a#1","10","n"]',
    "expiry_bool": b'["alice","d1",null,"a#1",true,"n"]',
    "expiry_float": b'["alice","d1",null,"a#1",10.5,"n"]',
    "expiry_beyond_int64": b'["alice","d1",null,"a#1",99999999999999999999999,"n"]',
    "principal_number": b'[7,"d1",null,"a#1",10,"n"]',
    "parent_object": b'["alice","d1",{},"a#1",10,"n"]',
    "five_claims": b'["alice","d1",null,"a#1",10]',
    "an_object": b'{"principal":"alice"}',
    "not_json": b"\xff\xfe",
    "nested": b"[" * 50_000 + b"]" * 50_000,
}


@pytest.mark.parametrize("case", sorted(BAD_CLAIMS))
def test_signed_tokens_with_malformed_claims_are_refused(gw, case, tmp_path, capsys):
    """Claims are type-checked after the MAC: a null or 1e400 expiry ended in a traceback."""
    from containmentbench.cli.main import main

    token = _signed(BAD_CLAIMS[case])
    claims, signal = gw.authority.verify(token, principal_id="alice", agent_instance="a#1",
                                         tick=3)
    assert claims is None and signal == FORGED
    assert gw.authority.claims(token) is None
    out = _call(gw, token)
    assert out["binding"] == "unbound" and out["integrity"] == [FORGED]
    key = tmp_path / "key"
    key.write_bytes(KEY)
    toks = tmp_path / "tokens.txt"
    toks.write_text(f"{token}\n")
    capsys.readouterr()
    assert main(["cim", "tokens", "--key-file", str(key), "--tokens", str(toks),
                 "--out", str(tmp_path / "claims.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tokens.txt:1" in err and "field 'token'" in err
    assert "Traceback" not in err and not (tmp_path / "claims.json").exists()


def test_a_tokens_file_that_is_a_fifo_or_dev_zero_is_refused(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).parent / "containmentbench")
    key = tmp_path / "key"
    key.write_bytes(KEY)
    for kind in ("fifo", "zero"):
        toks = tmp_path / f"tokens-{kind}"
        if kind == "fifo":
            os.mkfifo(toks)
        else:
            toks.symlink_to("/dev/zero")
        res = subprocess.run([cli, "cim", "tokens", "--key-file", str(key), "--tokens",
                              str(toks)], capture_output=True, text=True, timeout=60)
        err = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(err) == 1 and str(toks) in err[0], err
