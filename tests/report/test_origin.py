"""Who wrote a trace text (report/origin.py): the integrity audit (Table 28) checks what the
benchmark wrote, so a hostile tool name or argument that the runtime echoes back into a tool
result no longer fails a study, while a URL planted in benchmark content still does."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

from containmentbench.defense.loading import load_defense
from containmentbench.models.base import Completion
from containmentbench.report.integrity import audit
from containmentbench.report.origin import Echoes, benchmark_part, model_strings
from containmentbench.report.rundir import RunDir
from containmentbench.runtime.driver import ShardContext, run_episodes, shard_tables
from containmentbench.runtime.episode import RuntimeConfig
from containmentbench.trace.io import write_shard

HOSTILE_TOOL = '{"tool": "http://attacker.example.com/fetch", "arguments": {}}'
HOSTILE_ARG = ('{"tool": "read_email", "arguments": '
               '{"email_id": "see http://attacker.example.com/x and bob@attacker.com"}}')
DONE = '{"final_answer": "Done."}'


class _Replies:
    """Each episode gets the fixed completions in order (the last one repeats)."""

    name = "replies"
    seed_supported = False

    def __init__(self, *replies: str) -> None:
        self.replies = replies
        self.seen: dict[str, int] = {}

    def generate(self, reqs):
        out = []
        for r in reqs:
            key = r.request_id.split("/")[0]
            k = self.seen[key] = self.seen.get(key, -1) + 1
            out.append(Completion(self.replies[min(k, len(self.replies) - 1)]))
        return out

    def close(self):
        pass


def _run(tmp_path, smoke, *replies: str, plant: str | None = None) -> RunDir:
    """A run directory of real traces of the first smoke scenario under ``replies``;
    ``plant`` is appended to the text of its first ``source`` event (benchmark content)."""
    ctx = ShardContext("t", "m", "b", "none", 0, None)
    policy = load_defense("none")
    eps, wall, model_s = run_episodes(smoke[:1], policy, _Replies(*replies), ctx,
                                      RuntimeConfig())
    tables = shard_tables(eps, ctx, policy, False, wall, model_s)
    if plant is not None:
        ev = tables["events"]
        text, kind = ev.column("text").to_pylist(), ev.column("kind").to_pylist()
        i = kind.index("source")
        text[i] += plant
        tables["events"] = ev.set_column(ev.schema.get_field_index("text"), "text",
                                         pa.array(text, pa.string()))
    root = tmp_path / "run"
    write_shard(root / "traces" / "m" / "none" / "seed=0" / "security" / "shard-0", tables)
    return RunDir(root)


def _domains(run: RunDir) -> dict:
    return audit(run).filter(pl.col("check") == "local-only domains").row(0, named=True)


@pytest.mark.parametrize("reply", [HOSTILE_TOOL, HOSTILE_ARG], ids=["tool name", "argument"])
def test_a_hostile_completion_echoed_by_the_runtime_passes_the_audit(tmp_path, smoke, reply):
    run = _run(tmp_path, smoke, reply, DONE)
    events = run.load(next(iter(run.index))).events
    echo = [e for e in events if e["kind"] == "tool_result" and e["outcome"] == "failure"]
    assert "attacker.example.com" in echo[0]["text"]  # the runtime did echo it
    row = _domains(run)
    assert row["status"] == "pass", row
    assert "runtime echoes set aside" in row["note"]  # classified, not silently dropped
    assert all(r["status"] in ("pass", "deferred") for r in audit(run).iter_rows(named=True))


def test_a_url_planted_in_benchmark_content_still_fails(tmp_path, smoke):
    run = _run(tmp_path, smoke, HOSTILE_TOOL, DONE, plant=" see http://attacker.example.com/x")
    row = _domains(run)
    assert row["status"] == "fail" and "attacker.example.com" in row["first_violation"]
    assert row["violations"] == 1  # the planted one; the echo of the model's tool name is not


def test_what_the_model_wrote_later_does_not_hide_what_it_read_earlier():
    """Content read before the model wrote the same string is benchmark text."""
    echoes = Echoes()
    assert echoes.said("r") == ()
    echoes.feed({"rollout_id": "r", "kind": "invalid_tool", "tool": "http://a.com/f",
                 "args": "{}", "text": None, "origin": None})
    echoes.feed({"rollout_id": "r", "kind": "proposal", "tool": "read_email", "origin": "prefill",
                 "args": '{"email_id": "http://b.com"}', "text": None})  # the runtime's own
    assert echoes.said("r") == ("http://a.com/f",) and echoes.said("other") == ()
    assert benchmark_part("INVALID TOOL http://a.com/f: no", echoes.said("r")) == \
        "INVALID TOOL  : no"
    # JSON-escaped in a payload
    said = tuple(model_strings({"kind": "commit", "tool": "send_email", "origin": None,
                                "text": None, "args": '{"body": "say \\"hi\\" http://c.com"}'}))
    assert benchmark_part('{"body":"say \\"hi\\" http://c.com"}', said) == '{" ":" "}'


def test_credentials_and_paths_the_model_writes_are_outcomes_too(tmp_path, smoke):
    said = '{"final_answer": "password: hunter2, kept in /home/alice/notes.txt"}'
    rows = {r["check"]: r for r in audit(_run(tmp_path, smoke, said)).iter_rows(named=True)}
    for check in ("synthetic canaries", "redacted trace paths"):
        assert rows[check]["status"] == "pass", rows[check]
        assert "model-written text" in rows[check]["note"]
