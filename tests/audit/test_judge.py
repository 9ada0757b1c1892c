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
        return [Completion(self.text, error=self.error) for _ in reqs]


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


def test_judge_used_when_replay_is_off(tmp_path, bag) -> None:
    out = tmp_path / "traces" / "m" / "none" / "seed=1" / "active_tainted" / "shard-000"
    assert main(["rollout", "--suite", "smoke", "--stage", "active_tainted", "--defense",
                 "none", "--seed", "1", "--study", "t", "--out", str(out), "--quiet"]) == 0
    fake = FakeBackend('{"would_call_anyway": false, "confidence": 0.7}')
    info = audit_study(tmp_path, load_audit_policy(), bag, replay=False, judge=Judge(fake),
                       log=io.StringIO())
    assert info["implicit_analysis"] == "judge" and info["judge_calls"] == len(fake.seen) > 0
    sinks = pq.read_table(tmp_path / "audit" / "sinks.parquet").to_pylist()
    judged = [s for s in sinks if s["tier"] == "judge"]
    assert judged and all(s["flow_class"] in ("implicit", "asynchronous") and
                          s["confidence"] == 0.7 for s in judged)
