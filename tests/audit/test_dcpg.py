"""The DCPG on hand-built traces: lineage through observations, memory across a session
boundary (persisted to disk and reloaded), relayed messages, and what FIDES loses."""

from __future__ import annotations

from pathlib import Path

from containmentbench.audit.dcpg import DCPG, build
from containmentbench.audit.ifc import fides_flags
from containmentbench.audit.policy import load_audit_policy

POL = load_audit_policy()


def ev(seq, kind, session=1, inst="a#1.1", **kw):
    base = {"seq": seq, "kind": kind, "session": session, "agent_instance": inst,
            "tool": None, "args": None, "text": None, "labels": [], "tainted_fields": None,
            "resource_id": None, "resource_class": None, "call_id": None}
    base.update(kw)
    return base


def ed(src, dst, kind):
    return {"src": src, "dst": dst, "kind": kind}


def _build(events, edges, state_dir=None):
    return build("r-1", events, edges, POL.sources, POL.sinks, POL.memory_write,
                 POL.memory_read, state_dir)


def test_lineage_reaches_a_sink_through_an_observation() -> None:
    events = [ev(0, "source", inst=None, resource_id="src-x", text="evil payload"),
              ev(1, "user_goal"), ev(2, "model_call"),
              ev(3, "proposal", tool="read_document", call_id="c1"),
              ev(4, "tool_result", tool="read_document", call_id="c1"),
              ev(5, "model_call"),
              ev(6, "proposal", tool="send_email", call_id="c2"),
              ev(7, "commit", tool="send_email", call_id="c2", args='{"body":"x"}'),
              ev(8, "commit", tool="send_email", call_id="c3", args='{"body":"y"}',
                 inst="b#1.2")]
    edges = [ed(1, 2, "observe"), ed(2, 3, "emits"), ed(0, 4, "data"), ed(3, 4, "invocation"),
             ed(4, 5, "observe"), ed(2, 5, "context"), ed(5, 6, "emits"), ed(6, 7, "executes")]
    g = _build(events, edges)
    assert [s.seq for s in g.sinks] == [7, 8]
    s = g.sinks[0]
    assert set(s.lineage.paths) == {"src-x"}
    assert s.lineage.paths["src-x"] == (0, 4, 7)          # source -> exposure -> sink
    assert s.lineage.vias["src-x"] == frozenset({"direct"})
    assert g.sinks[1].lineage.paths == {}                 # another agent never saw it
    assert fides_flags(s.lineage)
    assert g.sources["src-x"]["text"] == "evil payload"


def test_memory_lineage_survives_a_session_boundary_via_disk(tmp_path: Path) -> None:
    events = [ev(0, "source", inst=None, resource_id="src-m", text="poison"),
              ev(1, "model_call"),
              ev(2, "tool_result", tool="read_document"),
              ev(3, "model_call"),
              ev(4, "commit", tool="memory_write", args='{"key":"k","value":"v"}'),
              ev(5, "memory_write", tool="memory_write", resource_id="k"),
              ev(6, "session_start", session=2, inst=None),
              ev(7, "model_call", session=2, inst="a#2.3"),
              ev(8, "memory_read", session=2, inst="a#2.3", tool="memory_read",
                 resource_id="k"),
              ev(9, "model_call", session=2, inst="a#2.3"),
              ev(10, "commit", session=2, inst="a#2.3", tool="post_status_note",
                 args='{"text":"t"}')]
    edges = [ed(0, 2, "data"), ed(2, 3, "observe"), ed(4, 5, "writes"), ed(5, 8, "memory"),
             ed(8, 9, "observe")]
    g = _build(events, edges, tmp_path)
    saved = tmp_path / "r-1.session-1.json"
    assert saved.exists()                                  # persisted at the boundary
    reloaded = DCPG.load(saved)
    assert set(reloaded.registry["k"]["_nt_taint"].paths) == {"src-m"}
    sink = g.sinks[-1]
    assert sink.lineage.paths["src-m"] == (0, 2, 5, 8, 10)
    assert "memory" in sink.lineage.vias["src-m"]
    assert not fides_flags(sink.lineage)                   # runtime-local labels are lost


def test_without_persistence_nothing_is_reloaded(tmp_path: Path) -> None:
    g = _build([ev(0, "user_goal"), ev(1, "session_start", session=2, inst=None)], [],
               tmp_path)
    assert g.sinks == [] and (tmp_path / "r-1.session-1.json").exists()


def test_relay_carries_the_senders_context() -> None:
    events = [ev(0, "source", inst=None, resource_id="src-r", text="t"),
              ev(1, "tool_result", tool="read_email"),
              ev(2, "model_call"),
              ev(3, "proposal", tool="delegate"),
              ev(4, "message", tool="delegate"),
              ev(5, "message", inst="w#1.2"),
              ev(6, "model_call", inst="w#1.2"),
              ev(7, "commit", inst="w#1.2", tool="send_email", args="{}")]
    edges = [ed(0, 1, "data"), ed(1, 2, "observe"), ed(3, 4, "sends"), ed(4, 5, "receives"),
             ed(5, 6, "observe")]
    g = _build(events, edges)
    lin = g.sinks[0].lineage
    assert set(lin.paths) == {"src-r"} and "relay" in lin.vias["src-r"]
    assert fides_flags(lin)


def test_graph_round_trips(tmp_path: Path) -> None:
    events = [ev(0, "source", inst=None, resource_id="s", text="t"),
              ev(1, "tool_result", tool="read_email"), ev(2, "model_call"),
              ev(3, "commit", tool="send_email", args="{}")]
    g = _build(events, [ed(0, 1, "data"), ed(1, 2, "observe")])
    again = DCPG.load(g.save(tmp_path / "g.json"))
    assert again.to_json() == g.to_json()
