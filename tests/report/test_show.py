"""``containmentbench show``: the timeline, its JSON, and bad input."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from containmentbench.report.rundir import RunDir
from containmentbench.trace.graph import TraceGraph
from tests.conftest import run_cli


def _some_rollout(run_dir, defense="none", stage="security"):
    t = pq.read_table(run_dir / "metrics" / "rollout_metrics.parquet").to_pylist()
    return next(r["rollout_id"] for r in t if r["defense"] == defense and r["stage"] == stage
                and r["committed_harm"] == 1)


def test_show_text_timeline(run_dir, capsys):
    rid = _some_rollout(run_dir)
    assert run_cli("show", rid, "--run-dir", run_dir) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"rollout {rid}")
    assert "simulated agent" in out
    for kind in ("source", "model_call", "proposal", "decision", "commit", "tool_result"):
        assert f" {kind} " in out
    # the committed violation's nodes are marked as in the taint closure
    assert any(" T  " in line and " commit " in line for line in out.splitlines())


def test_show_json_matches_trace_graph(run_dir, capsys):
    rid = _some_rollout(run_dir)
    assert run_cli("show", rid, "--run-dir", run_dir, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    r = RunDir(run_dir).load(rid)
    g = TraceGraph(r.events, r.edges)
    assert data["taint_closure"] == sorted(g.taint_closure())
    assert [e["seq"] for e in data["events"]] == sorted(e["seq"] for e in r.events)
    assert {e["seq"] for e in data["events"] if e["in_taint_closure"]} == g.taint_closure()
    assert data["rollout"]["defense"] == "none" and data["simulated_agent"] is True


def test_show_searches_results_without_study(run_dir, capsys):
    rid = _some_rollout(run_dir)
    assert run_cli("show", rid, "--results", run_dir.parent) == 0
    assert rid in capsys.readouterr().out


def test_unknown_rollout_is_one_line_exit_2(run_dir, capsys):
    assert run_cli("show", "r-0000000000000000", "--run-dir", run_dir) == 2
    err = capsys.readouterr().err
    assert "unknown rollout id 'r-0000000000000000'" in err and err.count("\n") == 1


def test_study_without_traces_is_exit_2(tmp_path, capsys):
    assert run_cli("show", "r-1", "--run-dir", tmp_path) == 2
    assert "no finished trace shards" in capsys.readouterr().err
    assert run_cli("report", tmp_path) == 2


# ------------------------------------------------------------------ hostile trace text

HOSTILE = {
    "OSC 52 clipboard write": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "CSI erase line, cursor up": "\x1b[2K\x1b[1A",
    "OSC 8 disguised link": "\x1b]8;;http://attacker.example.com\x1b\\docs\x1b]8;;\x1b\\",
    "backspace overwrite": "safe\x08\x08\x08\x08evil",
    "bidi override": "\u202egnp.exe",
    "NUL": "a\x00b",
    "C1 CSI": "\x9b2J",
}
_RAW = set("\x1b\x07\x08\x00\x9b\u202e")


def _with_hostile_text(run_dir, tmp_path, rid):
    """A copy of the run whose rollout ``rid`` has every hostile sequence in its first
    completion and a forged timeline line in the labels of its first observation (a field
    printed whole, not as a shortened excerpt)."""
    import shutil

    import pyarrow as pa

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    for ev in sorted((copy / "traces").rglob("events.parquet")):
        t = pq.read_table(ev)
        ids, kinds = t.column("rollout_id").to_pylist(), t.column("kind").to_pylist()
        if rid not in ids:
            continue
        text = t.column("text").to_pylist()
        i = next(k for k, x in enumerate(kinds) if ids[k] == rid and x == "model_call")
        text[i] = " ".join(HOSTILE.values())
        j = next(k for k, x in enumerate(kinds) if ids[k] == rid and x == "tool_result")
        labels = t.column("labels").to_pylist()
        labels[j] = [*labels[j], "x\n  999     0     forged  line"]
        t = t.set_column(t.schema.get_field_index("text"), "text", pa.array(text, pa.string()))
        t = t.set_column(t.schema.get_field_index("labels"), "labels",
                         pa.array(labels, t.schema.field("labels").type))
        pq.write_table(t, ev)
    return copy


def test_show_spells_out_terminal_control_sequences(run_dir, tmp_path, capsys):
    rid = _some_rollout(run_dir)
    copy = _with_hostile_text(run_dir, tmp_path, rid)
    capsys.readouterr()
    assert run_cli("show", rid, "--run-dir", copy, "--width", 400) == 0
    out = capsys.readouterr().out
    assert not _RAW & set(out), sorted(_RAW & set(out))
    for spelled in ("\\x1b]52;c;cm0gLXJmIH4=\\x07", "\\x1b[2K\\x1b[1A",
                    "\\x1b]8;;http://attacker.example.com\\x1b\\docs", "safe\\x08\\x08",
                    "\\u202egnp.exe", "a\\x00b", "\\x9b2J"):
        assert spelled in out, spelled
    assert not any(line.startswith("  999") for line in out.splitlines())  # no forged line
    assert "x\\n  999" in out

    assert run_cli("show", rid, "--run-dir", copy, "--json") == 0
    assert not _RAW & set(capsys.readouterr().out)  # JSON escapes them too


def test_show_raw_prints_the_stored_characters(run_dir, tmp_path, capsys):
    rid = _some_rollout(run_dir)
    copy = _with_hostile_text(run_dir, tmp_path, rid)
    capsys.readouterr()
    assert run_cli("show", rid, "--run-dir", copy, "--width", 400, "--raw") == 0
    out = capsys.readouterr().out
    assert "\x1b]52;c;cm0gLXJmIH4=\x07" in out and "\u202egnp.exe" in out and "a\x00b" in out
