"""The §4.3 judge fallback: prompt, parsing, errors, and its use on traces without replay."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from containmentbench.audit.judge import Judge, history, parse, prompt
from containmentbench.audit.policy import load_audit_policy
from containmentbench.audit.replay import PLACEHOLDER
from containmentbench.audit.study import audit_study
from containmentbench.cli.main import main
from containmentbench.errors import BenchError
from containmentbench.models.base import Completion


class FakeBackend:
    def __init__(self, text: str, error: str | None = None) -> None:
        self.text, self.error, self.seen = text, error, []

    def generate(self, reqs):
        self.seen.extend(reqs)
        return [Completion(self.text, error=self.error, prompt_tokens=400,
                           completion_tokens=57) for _ in reqs]


def test_prompt_neutralises_the_source_in_context_b() -> None:
    p = prompt("goal\nEVIL TEXT\nmore", "EVIL TEXT", "send_email", {"to": "a"})
    a, b = p.split("Context B:")
    assert "EVIL TEXT" in a and "EVIL TEXT" not in b.split("Question")[0]
    assert PLACEHOLDER in b and '"would_call_anyway"' in p


@pytest.mark.parametrize("text,want", [
    ('{"would_call_anyway": false, "confidence": 0.8, "reasoning": "x"}', (False, 0.8)),
    ('Sure: {"would_call_anyway": true, "confidence": 1}', (True, 1.0)),
    ('{"would_call_anyway": "no", "confidence": 0.8}', None),
    ('{"would_call_anyway": false, "confidence": 1.8}', None),
    ("no json here", None),
])
def test_parse(text, want) -> None:
    assert parse(text) == want


def test_provider_error_is_an_error_not_a_verdict() -> None:
    j = Judge(FakeBackend("", error="HTTP 500"))
    with pytest.raises(BenchError, match="judge"):
        j.influenced("ctx", "src", "send_email", {})


def test_history_is_one_agents_view_before_the_sink() -> None:
    ev = [{"seq": 0, "kind": "user_goal", "agent_instance": "a", "text": "goal", "tool": None},
          {"seq": 1, "kind": "tool_result", "agent_instance": "a", "text": "page",
           "tool": "read_document"},
          {"seq": 2, "kind": "tool_result", "agent_instance": "b", "text": "other", "tool": None},
          {"seq": 3, "kind": "model_call", "agent_instance": "a", "text": "call", "tool": None},
          {"seq": 4, "kind": "tool_result", "agent_instance": "a", "text": "late", "tool": None}]
    assert history(ev, "a", 4) == "[user_goal] goal\n[tool_result:read_document] page\n[agent] call"


def _implicit_run(tmp_path):
    """Rollouts of the labelled suite's implicit-control cases: the sink carries no content
    of the source, so only the causal analyzer can attribute it."""
    ids = ",".join(f"tb-implicit_control-{i:03d}" for i in range(3))
    out = tmp_path / "traces" / "m" / "none" / "seed=1" / "security" / "shard-000"
    assert main(["rollout", "--suite", "taintbench", "--stage", "security", "--scenarios",
                 ids, "--defense", "none", "--seed", "1", "--study", "t", "--sim-profile",
                 "always_follow", "--out", str(out), "--quiet"]) == 0
    return tmp_path


def test_judge_used_when_replay_is_off(tmp_path, bag) -> None:
    run = _implicit_run(tmp_path)
    fake = FakeBackend('{"would_call_anyway": false, "confidence": 0.7}')
    info = audit_study(run, load_audit_policy(), bag, replay=False, judge=Judge(fake),
                       log=io.StringIO())
    assert info["implicit_analysis"] == "judge" and info["judge_calls"] == len(fake.seen) > 0
    sinks = pq.read_table(run / "audit" / "sinks.parquet").to_pylist()
    judged = [s for s in sinks if s["tier"] == "judge"]
    assert judged and all(s["flow_class"] == "implicit" and s["confidence"] == 0.7
                          and s["causal"] == "cause" for s in judged)
    # §5.5's judge tokens: counted per call and reported in the overhead table
    cap = pq.read_table(run / "audit" / "tables" / "audit_overhead.parquet") \
        .schema.metadata[b"caption"].decode()
    assert f"{len(fake.seen)} calls, 457 tokens per call" in cap


def test_without_replay_or_judge_a_sink_is_not_probed_never_no_cause(tmp_path, bag) -> None:
    run = _implicit_run(tmp_path)
    audit_study(run, load_audit_policy(), bag, replay=False, log=io.StringIO())
    sinks = pq.read_table(run / "audit" / "sinks.parquet").to_pylist()
    share = [s for s in sinks if s["tool"] in ("share_document", "create_event")]
    assert share and all(s["causal"] == "not_probed" and not s["audited"] for s in share)
    gap = pq.read_table(run / "audit" / "rollouts.parquet").to_pylist()
    assert sum(r["not_probed"] for r in gap) == len(share)
    assert sum(r["probed_no_cause"] for r in gap) == 0
