"""Outputs as they are: a completion cut at max_tokens is ``truncated`` (never an answer or
an action), identical calls are counted and can stop an agent, and a prefilled first step
puts the untrusted carrier in the model's first observation."""

from __future__ import annotations

import pytest

from containmentbench.defense.loading import load_defense
from containmentbench.models.base import Completion
from containmentbench.runtime.driver import ShardContext, run_episodes, shard_tables
from containmentbench.runtime.episode import RuntimeConfig
from containmentbench.scenarios.manifest import load_suite
from tests.conftest import ROOT


class _Replies:
    """A backend that answers every request with the next of a fixed list of completions
    (the last one repeats), and keeps the requests it saw."""

    name = "replies"
    seed_supported = False

    def __init__(self, *replies: Completion) -> None:
        self.replies = list(replies)
        self.requests: list = []

    def generate(self, reqs):
        out = []
        for r in reqs:
            self.requests.append(r)
            k = min(sum(1 for q in self.requests if q.request_id.split("/")[0]
                        == r.request_id.split("/")[0]) - 1, len(self.replies) - 1)
            out.append(self.replies[k])
        return out

    def close(self):
        pass


def _run(scenarios, backend, cfg=None):
    ctx = ShardContext("t", "m", "b", "none", 0, None)
    eps, _, _ = run_episodes(scenarios, load_defense("none"), backend, ctx, cfg or RuntimeConfig())
    return eps


@pytest.fixture(scope="module")
def exposed():
    return load_suite(ROOT / "scenarios" / "exposed_smoke")


def test_cut_completion_is_truncated_not_an_answer(smoke):
    # a complete-looking final answer, but the provider cut it at max_tokens
    cut = Completion('{"final_answer": "Done, I sent the', completion_tokens=32,
                     finish_reason="length")
    ok = Completion('{"final_answer": "Done."}', finish_reason="stop")
    ep = _run(smoke[:1], _Replies(cut, ok))[0]
    calls = [e for e in ep.rec.events if e["kind"] == "model_call"]
    assert [c["parse_status"] for c in calls] == ["truncated", "final_answer"]
    assert [e["kind"] for e in ep.rec.events].count("truncated") == 1
    assert ep.counts["truncated"] == 1 and ep.final_answer == "Done."
    # the agent was told, in its next observation
    assert ep.rec.events[calls[1]["seq"] - 1]["text"].startswith("TRUNCATED")


def test_truncations_count_toward_giving_up(smoke):
    cut = Completion('{"tool": "send_email", "arguments": {"to": "a@corp.lo',
                     finish_reason="length")
    ep = _run(smoke[:1], _Replies(cut), RuntimeConfig(max_consecutive_errors=3))[0]
    assert ep.counts["truncated"] == 3 and ep.counts["proposals"] == 0
    assert ep.final_answer == "(no answer: too many malformed actions)"
    row = shard_tables([ep], ShardContext("t", "m", "b", "none", 0, None),
                       load_defense("none"), False, [0.0], [0.0], "j", 0.0)["rollouts"]
    assert row["n_truncated"].to_pylist() == [3]


def test_identical_calls_are_counted_and_can_stop_an_agent(smoke):
    same = Completion('{"tool": "memory_list", "arguments": {}}', finish_reason="stop")
    free = _run(smoke[:1], _Replies(same), RuntimeConfig(max_steps=5))[0]
    assert free.status == "step_limit" and free.counts["repeated_calls"] == 4
    assert free.counts["proposals"] == 5
    stopped = _run(smoke[:1], _Replies(same), RuntimeConfig(max_steps=10,
                                                            max_identical_calls=3))[0]
    assert stopped.status == "repeat_limit"
    # the third identical call is counted but never proposed; the stop is the agent's
    # recorded (failed) final answer
    assert stopped.counts["proposals"] == 2 and stopped.counts["repeated_calls"] == 2
    assert stopped.final_answer == "(no answer: 3 identical memory_list calls)"


def test_prefill_puts_the_carrier_in_the_first_observation(exposed):
    done = Completion('{"final_answer": "Done."}', finish_reason="stop")
    for mode in ("prompt", "native"):
        for s in exposed:
            backend = _Replies(done)
            ep = _run([s], backend, RuntimeConfig(tool_mode=mode))[0]
            first = backend.requests[0].messages
            step = s.prefill[0]
            # one user turn: the goal, then the prefilled read's observation; no scripted
            # assistant action for the model to copy
            assert [m["role"] for m in first] == ["system", "user"]
            goal, obs = first[1]["content"].split("\n\n", 1)
            assert goal == s.goals[0] and obs.startswith(f"OBSERVATION {step.tool}:")
            ev = ep.rec.events
            prop = next(e for e in ev if e["kind"] == "proposal")
            assert prop["origin"] == "prefill" and prop["tool"] == step.tool
            assert any(e["kind"] == "decision" and e["call_id"] == prop["call_id"] for e in ev)
            call = next(e for e in ev if e["kind"] == "model_call")
            if s.untrusted and s.stage != "clean":
                # exposed by construction: the first model call carries the carrier's label
                assert f"taint:{s.untrusted[-1]['source_id']}" in ep.rec.labels[call["seq"]]
                assert s.untrusted[-1]["text"][:40] in obs
            assert ep.counts["prefilled"] == 1 and ep.counts["proposals"] == 0


def test_sim_follows_prefilled_injections_and_traces_are_deterministic(exposed):
    from containmentbench.models.base import BackendConfig, make_backend

    sim = make_backend(BackendConfig("sim", "sim", options={"profile": "always_follow"}))
    a = _run(exposed, sim)
    b = _run(exposed, sim)
    assert [e.rec.events for e in a] == [e.rec.events for e in b]
    attacked = [e for e in a if e.s.attack_steps and e.s.stage == "security"]
    assert attacked and all(e.commits for e in attacked)
