"""study.parser=legacy|current: the mode is recorded on every rollout, and a legacy-parser
shard reparsed with the current parser gives Table 24's old/new counts (Appendix I)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from containmentbench.config.compose import load_study
from containmentbench.errors import BenchError
from containmentbench.parser import DEFAULT_CONFIG, PARSER_VERSION, ParserConfig
from containmentbench.parser.modes import parser_for, recorded_version
from tests.conftest import run_cli


def test_recorded_versions():
    assert recorded_version(None) == recorded_version(DEFAULT_CONFIG) == PARSER_VERSION
    assert recorded_version(parser_for("legacy")) == f"{PARSER_VERSION}+legacy"
    assert recorded_version(ParserConfig.strict()).startswith(f"{PARSER_VERSION}+config-")
    with pytest.raises(ValueError, match="unknown parser mode"):
        parser_for("old")


def test_legacy_shard_reparse_gives_old_and_new_counts(tmp_path):
    for mode in ("legacy", "current"):
        assert run_cli("rollout", "--suite", "smoke", "--stage", "active_tainted",
                       "--defense", "intent_ledger_v2", "--seed", 1, "--parser", mode,
                       "--out", tmp_path / mode / "shard", "--quiet") == 0
        assert run_cli("reparse", tmp_path / mode, "--out", tmp_path / f"re-{mode}") == 0
    legacy = pq.read_table(tmp_path / "legacy" / "shard" / "rollouts.parquet")
    assert set(legacy.column("parser_version").to_pylist()) == {f"{PARSER_VERSION}+legacy"}
    old = json.loads((tmp_path / "re-legacy" / "summary.json").read_text())
    new = json.loads((tmp_path / "re-current" / "summary.json").read_text())
    # the legacy parser read the sim agent's repairable formats as final answers; the
    # current parser recovers them as valid proposals (Table 24 rows)
    assert old["old_action_like_final_answers"] > 0
    assert old["valid_tool_proposals_recovered"] > 0
    assert old["status_counts_old"].get("valid_repaired_json", 0) == 0
    assert old["status_counts_new"]["valid_repaired_json"] == old["repaired_parses"] > 0
    # recorded with the current parser, reparse recovers nothing
    assert new["valid_tool_proposals_recovered"] == 0 and new["n_changed"] == 0


def test_study_parser_option_validated():
    data = load_study(["study=parser_legacy"])
    assert data["study"]["parser"] == "legacy"
    assert load_study(["study=smoke"])["study"]["parser"] == "current"
    with pytest.raises(BenchError, match=r"field 'study\.parser'"):
        load_study(["study=smoke", "study.parser=old"])
