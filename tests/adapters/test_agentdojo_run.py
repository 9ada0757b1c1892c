"""Determinism, provider errors and the command line of the AgentDojo adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("agentdojo")

from containmentbench.adapters.agentdojo import run as R
from containmentbench.adapters.agentdojo import tasks as T
from containmentbench.cli.main import main
from containmentbench.defense.loading import load_defense
from containmentbench.trace.io import read_table


def _shard(tmp: Path, name: str, *extra: str) -> Path:
    out = tmp / name
    rc = main(["adapters", "agentdojo", "--suite", "workspace", "--defense", "none",
               "--seed", "1", "--user-tasks", "user_task_0", "--injection-tasks",
               "injection_task_0", "--out", str(out), *extra])
    assert rc == 0
    return out


def test_rerun_is_byte_identical_with_frozen_clock(tmp_path):
    a, b = _shard(tmp_path, "a"), _shard(tmp_path, "b")
    for name in ("rollouts", "events", "edges", "adapter_labels"):
        assert (a / f"{name}.parquet").read_bytes() == (b / f"{name}.parquet").read_bytes()
    ev = read_table(a / "events.parquet", "events").to_pylist()
    commits = [e for e in ev if e["kind"] == "commit"]
    assert commits  # the injected email is sent: its diff carries the frozen timestamp
    assert any("2024-05-15T10:00:00" in e["text"] for e in commits)
    kinds = {e["kind"] for e in ev}
    assert {"source", "proposal", "decision", "commit", "tool_result", "final_answer"} <= kinds
    ids = [e["call_id"] for e in ev if e["kind"] == "proposal"]
    assert len(ids) == len(set(ids)) and all(":call-" in i for i in ids)


def test_finished_shard_is_never_overwritten(tmp_path, capsys):
    out = _shard(tmp_path, "a")
    before = (out / "events.parquet").read_bytes()
    rc = main(["adapters", "agentdojo", "--suite", "workspace", "--defense", "none",
               "--seed", "1", "--user-tasks", "user_task_0", "--out", str(out)])
    assert rc == 2 and "never overwritten" in capsys.readouterr().err
    assert (out / "events.parquet").read_bytes() == before


@pytest.mark.parametrize("argv,field", [
    (["--suite", "bogus", "--defense", "none", "--seed", "1"], "suite"),
    (["--suite", "banking", "--defense", "nope", "--seed", "1"], "defense"),
    (["--suite", "banking", "--defense", "none", "--seed", "1", "--user-tasks", "user_task_99"],
     "task"),
    (["--suite", "banking", "--defense", "none", "--seed", "1", "--pipeline", "vllm"],
     "model"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, field):
    rc = main(["adapters", "agentdojo", *argv, "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and field in err
    assert not (tmp_path / "x").exists()


def test_provider_error_is_an_error_never_an_outcome():
    import openai

    class Failing:
        name = "failing"

        def query(self, *a, **k):
            raise openai.APIConnectionError(request=None)  # type: ignore[arg-type]

    class Settings(R.RunSettings):
        def make_pipeline(self, spec):
            return Failing()

    cfg = Settings("t", "banking", load_defense("none"), 1, pipeline="backend", model="m",
                   backend={"name": "openai"})
    spec = T.task_spec("banking", "user_task_0", "injection_task_0", "direct")
    o = R.run_adapter(cfg, spec)
    row = R.label_row(cfg, o)
    assert o.status == "error" and "APIConnection" in o.error
    assert row["adapter_security"] is None and row["native_security"] is None
    assert row["trace_violation"] is None and not row["parity_applicable"]

    from containmentbench.adapters.agentdojo.metrics import rollout_row
    from containmentbench.metrics import definitions as M

    tables = R.shard_tables(cfg, [o])
    t = M.RolloutTrace(tables["rollouts"].to_pylist()[0], [], [], None)  # type: ignore[arg-type]
    m = rollout_row(t, row)
    assert m["committed_harm"] is None and m["benign_success"] is None


def test_parity_verb_reports_counts(tmp_path, capsys):
    _shard(tmp_path / "traces", "s")
    rc = main(["adapters", "parity", str(tmp_path / "traces"), "--out",
               str(tmp_path / "p.json")])
    assert rc == 0
    s = json.loads((tmp_path / "p.json").read_text())["suites"]["workspace"]
    assert s["rows"] == 2 and s["linkage_complete"] == 2
    assert "workspace: parity" in capsys.readouterr().err


class _ScriptedServed:
    """A served model for the adapter (the ModelBackend API): first two native calls, then an
    answer; it keeps every request it saw."""

    name = "scripted"
    seed_supported = True

    def __init__(self) -> None:
        self.requests = []

    def generate(self, reqs):
        from containmentbench.canonical import canonical_json
        from containmentbench.models.base import Completion

        out = []
        for r in reqs:
            self.requests.append(r)
            if not any(m["role"] == "assistant" for m in r.messages):
                calls = [{"name": "get_most_recent_transactions", "arguments": {"n": 5}},
                         {"name": "send_money", "arguments": {
                             "recipient": "US133000000121212121212", "amount": 1.0,
                             "subject": "s", "date": "2022-01-01"}}]
                out.append(Completion("<tool_call>...</tool_call>", 100, 20,
                                      finish_reason="stop", native_calls=canonical_json(calls),
                                      tool_mode="native", prompt_hash="h"))
            else:
                out.append(Completion("done", 120, 2, finish_reason="stop",
                                      native_calls="[]", tool_mode="native", prompt_hash="h"))
        return out

    def close(self):
        pass


def test_served_pipeline_goes_through_the_gateway(monkeypatch):
    """AgentDojo's tool-calling pipeline with our model element: every assistant message is a
    model_call with the call's record, every tool call a linked proposal, and every request
    carries the study's decoding and a per-request seed that does not depend on the defense
    (so native and adapter runs draw alike)."""
    from containmentbench.models.base import BackendConfig

    served = _ScriptedServed()
    monkeypatch.setattr(R, "served_backend", lambda config: served)
    spec = T.task_spec("banking", "user_task_0", None, "direct")
    decoding = {"temperature": 0.7, "top_p": 0.95, "max_tokens": 300, "seed_policy": "replicates"}
    rows = {}
    for d in ("none", "intent_ledger_v2"):
        cfg = R.RunSettings("t", "banking", load_defense(d), 1, "backend", "scripted",
                            {"name": "vllm"}, decoding=decoding,
                            backend_config=BackendConfig("vllm", "scripted", tool_mode="native"))
        o = R.run_adapter(cfg, spec)
        rows[d] = (o, R.label_row(cfg, o))
    o, lab = rows["none"]
    kinds = [e["kind"] for e in o.rec.events]
    assert o.status == "ok" and kinds.count("model_call") == 2 and kinds.count("proposal") == 2
    calls = [e for e in o.rec.events if e["kind"] == "model_call"]
    assert calls[0]["finish_reason"] == "stop" and calls[0]["call_prompt_tokens"] == 100
    assert lab["linkage_complete"] and lab["parity_applicable"] and lab["parity"]
    o2, lab2 = rows["intent_ledger_v2"]
    dec = [e for e in o2.rec.events if e["kind"] == "decision" and e["tool"] == "send_money"]
    assert dec[0]["decision"] == "block" and lab2["linkage_complete"]
    assert not lab2["parity_applicable"]  # the defense intervened
    reqs = served.requests
    assert {(r.temperature, r.max_tokens, r.tool_mode) for r in reqs} == {(0.7, 300, "native")}
    # native run, adapter run (none), then intent_ledger_v2's: same task, seed and step ->
    # same request seed whatever the defense (common random numbers)
    first = [r.seed for r in reqs if not any(m["role"] == "assistant" for m in r.messages)]
    assert len(first) == 4 and len(set(first)) == 1
    assert reqs[1].messages[2]["tool_calls"][0]["function"]["name"] == \
        "get_most_recent_transactions"
    assert reqs[1].messages[3]["role"] == "tool"
    assert {t["name"] for t in reqs[0].tools} >= {"send_money", "get_most_recent_transactions"}


def test_metrics_check_event_numbering_of_adapter_shards(tmp_path):
    """Adapter shards pass through the same trace checks as ours (numbering 0..n-1 in order,
    forward edges): a shard with its events out of order is a one-line error, not metrics."""
    import pyarrow.parquet as pq
    import pytest

    from containmentbench.adapters.agentdojo.metrics import shard_rows
    from containmentbench.errors import BenchError

    out = _shard(tmp_path, "a")
    assert shard_rows(str(out))  # intact: metrics rows
    ev = pq.read_table(out / "events.parquet")
    pq.write_table(ev.take(list(reversed(range(ev.num_rows)))), out / "events.parquet")
    with pytest.raises(BenchError, match="seq"):
        shard_rows(str(out))
