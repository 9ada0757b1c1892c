"""reparse on a sim shard reproduces the parse statuses recorded at rollout time for the same
parser version, and reports differences under a changed parser configuration (§6.2)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.conftest import run_cli


def test_reparse_matches_recorded_then_detects_changes(tmp_path, capsys):
    shard = tmp_path / "shard"
    assert run_cli("rollout", "--suite", "full_main", "--stage", "security", "--defense",
                   "intent_ledger_v2", "--seed", 2, "--out", shard, "--quiet") == 0
    assert run_cli("reparse", shard, "--out", tmp_path / "same") == 0
    same = json.loads((tmp_path / "same" / "summary.json").read_text())
    assert same["input_model_actions"] > 1000 and same["n_changed"] == 0
    assert same["status_counts_old"] == same["status_counts_new"]
    assert same["repaired_parses"] > 0  # the sim agent emits non-strict formats
    capsys.readouterr()
    assert run_cli("reparse", shard, "--out", tmp_path / "strict", "--strict") == 0
    strict = json.loads((tmp_path / "strict" / "summary.json").read_text())
    assert strict["n_changed"] > 0 and strict["repaired_parses"] == 0
    rows = pq.read_table(tmp_path / "strict" / "reparse.parquet").to_pylist()
    changed = [r for r in rows if r["changed"]]
    assert changed and all(r["old_status"] != r["new_status"] or r["old_repaired"]
                           for r in changed)
    assert "| input model actions |" in capsys.readouterr().out
