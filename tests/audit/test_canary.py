"""Tier 1 live in a study: the instrumented replay (canary appended to every untrusted source)
and how its evidence is matched to the original trace's sinks."""

from __future__ import annotations

from collections import Counter

from containmentbench.audit.canary import canary_hits, instrument, strip
from containmentbench.audit.evidence import canary_for
from containmentbench.audit.replay import Replayer, run_one
from containmentbench.canonical import canonical_json
from containmentbench.defense.loading import load_defense
from containmentbench.models.base import BackendConfig, make_backend
from containmentbench.runtime.episode import RolloutSpec, RuntimeConfig

SINKS = frozenset({"send_email", "share_document", "post_status_note", "create_event",
                   "send_invite", "update_crm", "draft_email", "write_task_record"})


def test_instrument_appends_the_canary_to_untrusted_items_only(smoke) -> None:
    s = next(x for x in smoke if x.untrusted)
    sid = s.untrusted[0]["source_id"]
    inst = instrument(s)
    assert inst.untrusted[0]["text"].endswith(f"[ref {canary_for(sid)}]")
    trusted = [d["body"] for d in inst.initial_state["documents"]
               if d["provenance"]["trust"] == "trusted"]
    assert all("NT-" not in b for b in trusted)
    assert instrument(inst).record == inst.record  # idempotent


def test_strip_takes_the_canary_out_of_arguments() -> None:
    tok = canary_for("src-1")
    assert strip({"body": f"see page [ref {tok}]", "to": ["a", f"b {tok}"]}) == \
        {"body": "see page", "to": ["a", "b "]}


def test_on_the_sim_agent_no_sink_carries_a_canary(smoke) -> None:
    """The simulated agent writes its plan's arguments, never text it read: the instrumented
    run reproduces the trace and finds no Tier 1 evidence (Tier 1 in sim studies is 0 by
    construction; a real model that copies the page would carry it)."""
    s = next(x for x in smoke if x.stage == "security" and x.attack_steps)
    backend = make_backend(BackendConfig(name="sim", model="sim",
                                         options={"profile": "always_follow"}))
    spec = RolloutSpec("r-c", "t", "sim", "sim", "none", 1, "always_follow")
    rep = Replayer(s, load_defense("none"), spec, RuntimeConfig(), backend, SINKS)
    ep = run_one(s, rep.policy, spec, rep.cfg, backend)
    original = Counter((e["tool"], e.get("args") or "{}") for e in ep.rec.events
                       if e["kind"] == "commit" and e.get("tool") in SINKS)
    hits = canary_hits(rep, original, [u["source_id"] for u in s.untrusted])
    assert hits is not None and not any(hits.values()) and rep.replays == 1
    # a trace the instrumented run does not reproduce gives no evidence at all
    assert canary_hits(rep, Counter({("send_email", canonical_json({})): 1}),
                       ["x"]) is None
