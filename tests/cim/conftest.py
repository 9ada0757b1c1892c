"""Fixtures for the CIM tests: a real sim rollout shard (smoke suite), its CIM export, a
small generated store, and a hand-built telemetry store whose query answers are known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from containmentbench.cim.project import EPOCH_US
from containmentbench.cim.schema import CIM_EVENTS, conform
from containmentbench.cim.store import write_store
from containmentbench.cli.main import main


@pytest.fixture(scope="session")
def rollout_shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traces") / "smoke-none"
    rc = main(["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1",
               "--out", str(out), "--quiet"])
    assert rc == 0
    return out


@pytest.fixture(scope="session")
def rollout_store(rollout_shard: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cim") / "smoke"
    rc = main(["cim", "export", "--traces", str(rollout_shard.parent), "--out", str(out),
               "--format", "parquet,otel", "--chain"])
    assert rc == 0
    return out


SMALL = {"users": 40, "agents": 400, "delegations_per_day": 320, "events_min": 20,
         "events_max": 80, "loops_w1": 30, "loops_w2": 25, "loops_w3": 40,
         "overlap_rate": 0.4, "files": 20_000, "repos": 100, "channels": 20,
         "tickets": 2_000, "records": 2_000, "chunk_events": 12_000, "seed": 7}


@pytest.fixture(scope="session")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from containmentbench.cim.generator import GenParams, generate

    out = tmp_path_factory.mktemp("gen") / "small"
    generate(GenParams(**SMALL), out)
    return out


# ---------------------------------------------------------------- hand-built telemetry
#
# dA (root, user u1) re-delegates to dB (new runtime: trace TB), which re-delegates to dC
# (continuing trace TB). dC shares msg-2 externally after reading msg-1; dB read a restricted
# file. dD (user u2) shares a confidential doc externally late, then gets an approval. dE
# (user u1) runs beside dA and writes into trace TA. One unbound row claims dC; one bound
# row of dE carries the wrong principal.

PARENT = {"dA": None, "dB": "dA", "dC": "dB", "dD": None, "dE": None}


def _row(eid: str, t: float, d: str | None, *, kind: str = "proposal", agent: str = "planner",
         inst: str = "iA", tool: str = "docs", op: str | None = "get", verb: str = "read",
         cls: str | None = "document", rid: str | None = None, label: str | None = "internal",
         direction: str = "internal", target: str | None = None, trace: str | None = None,
         parent: str | None = None, binding: str = "bound", principal: str | None = "u1",
         call: str | None = None, integrity: list[str] | None = None) -> dict[str, Any]:
    return {
        "time": EPOCH_US + int(t * 1e6), "event_id": eid, "delegation_id": d,
        "delegation_parent_id": PARENT.get(d) if d else None,
        "principal_user_id": principal, "agent_id": agent, "agent_instance_id": inst,
        "tool_name": tool if kind not in ("delegate", "approval") else "gateway",
        "tool_operation": op if kind not in ("delegate", "approval") else None,
        "action_semantic": verb if kind not in ("delegate", "approval") else "delegate",
        "action_outcome": "success", "direction": direction,
        "principal_scope": "external" if direction == "external" else "self",
        "resource_class": cls if kind != "delegate" else "agent",
        "resource_id": rid if kind != "delegate" else d, "resource_uri": None,
        "sensitivity_label": label if kind not in ("delegate", "approval") else None,
        "target_principal_id": target, "trace_id": trace,
        "span_id": f"s-{eid}" if trace else None, "parent_span_id": parent,
        "workflow_id": None, "labels": None, "event_kind": kind, "delegation_binding": binding,
        "call_id": call, "session_id": inst, "agent_hints": None, "integrity": integrity,
        "capture": "gateway", "covered": True,
        "gt_delegation_id": d}


def hand_rows() -> list[dict[str, Any]]:
    r = _row
    return [
        r("a0", 0, "dA", kind="delegate", trace="TA"),
        r("a1", 1, "dA", rid="doc-1", trace="TA", parent="s-a0"),
        r("a2", 2, "dA", tool="crm", cls="crm_record", rid="crm-1", label="confidential",
          trace="TA", parent="s-a1"),
        r("a3", 3, "dA", tool="agents", verb="delegate", cls="agent", rid="researcher",
          trace="TA", parent="s-a2"),
        r("b0", 4, "dB", kind="delegate", agent="researcher", inst="iB", trace="TB"),
        r("b1", 5, "dB", agent="researcher", inst="iB", tool="drive", cls="file", rid="file-9",
          label="restricted", trace="TB", parent="s-b0"),
        r("b2", 6, "dB", agent="researcher", inst="iB", tool="agents", verb="delegate",
          cls="agent", rid="mailer", trace="TB", parent="s-b1"),
        r("c0", 7, "dC", kind="delegate", agent="mailer", inst="iC", trace="TB",
          parent="s-b2"),
        r("c1", 8, "dC", agent="mailer", inst="iC", tool="email", cls="message", rid="msg-1",
          trace="TB", parent="s-c0"),
        r("c2", 9, "dC", agent="mailer", inst="iC", tool="email", verb="share", cls="message",
          rid="msg-2", direction="external", target="x@partner.example", trace="TB",
          parent="s-c1", call="k1"),
        r("c3", 10, "dC", kind="commit", agent="mailer", inst="iC", tool="email",
          verb="share", cls="message", rid="msg-2", direction="external",
          target="x@partner.example", trace="TB", parent="s-c2", call="k1"),
        r("c4", 11, "dC", agent="mailer", inst="iC", tool="email", cls="message", rid="msg-3",
          binding="unbound", principal=None,
          integrity=["misbinding:delegation_not_issued_to_agent"]),
        r("d0", 0, "dD", kind="delegate", inst="iD", principal="u2", trace="TD"),
        r("d1", 1, "dD", inst="iD", principal="u2", rid="doc-1", trace="TD", parent="s-d0"),
        r("d4", 2, "dD", inst="iD", principal="u2", rid="doc-1"),
        r("d2", 20, "dD", inst="iD", principal="u2", verb="share", rid="doc-2",
          label="confidential", direction="external", target="y@partner.example",
          trace="TD", parent="s-d1"),
        r("d3", 21, "dD", kind="approval", inst="iD", principal="u2", cls="delegation",
          rid="dD"),
        r("e0", 1.5, "dE", kind="delegate", inst="iE", trace="TE"),
        r("e1", 2.5, "dE", inst="iE", tool="slack", cls="channel", rid="chan-1", trace="TE",
          parent="s-e0"),
        r("e2", 3.5, "dE", inst="iE", tool="slack", verb="write", cls="channel", rid="chan-1",
          trace="TA", parent="s-a2"),
        r("e3", 4.5, "dE", inst="iE", tool="slack", cls="channel", rid="chan-2", trace="TE",
          parent="s-e1", principal="u2"),
    ]


@pytest.fixture()
def hand_store(tmp_path: Path) -> Path:
    rows = hand_rows()
    cols = {f.name: [r[f.name] for r in rows] for f in CIM_EVENTS}
    return write_store(tmp_path / "hand", conform(cols), workflow="hand")
