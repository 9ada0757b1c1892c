"""Bad scenario input: one-line errors naming file, line and field; exit 2; nothing written."""

from __future__ import annotations

import json
import shutil

import pytest

from containmentbench.errors import ValidationError
from containmentbench.scenarios.manifest import read_stage, verify_suite
from tests.conftest import ROOT, run_cli


@pytest.fixture
def suite_copy(tmp_path):
    dst = tmp_path / "smoke"
    shutil.copytree(ROOT / "scenarios" / "smoke", dst)
    return dst


def _edit_line(path, lineno, fn):
    lines = path.read_text().splitlines()
    rec = json.loads(lines[lineno - 1])
    fn(rec)
    lines[lineno - 1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")


def test_malformed_json_names_file_and_line(suite_copy):
    p = suite_copy / "clean.jsonl"
    lines = p.read_text().splitlines()
    lines[1] = lines[1][:-5]
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValidationError) as e:
        read_stage(p)
    msg = e.value.render()
    assert f"{p}:2" in msg and "\n" not in msg


def test_unknown_tool_in_plan(suite_copy):
    p = suite_copy / "security.jsonl"
    _edit_line(p, 3, lambda r: r["plans"]["benign"][0].update(tool="send_fax"))
    with pytest.raises(ValidationError) as e:
        read_stage(p)
    assert e.value.line == 3 and e.value.field == "plans.benign[0].tool"
    assert "unknown tool 'send_fax'" in e.value.render()


def test_ledger_entry_naming_missing_tool(suite_copy):
    p = suite_copy / "active_tainted.jsonl"
    _edit_line(p, 1, lambda r: r["ledger"][0].update(action="wire_money"))
    with pytest.raises(ValidationError) as e:
        read_stage(p)
    assert e.value.field == "ledger[0].action" and e.value.line == 1


def test_check_cli_reports_drift_and_bad_file_exit_codes(suite_copy, capsys):
    p = suite_copy / "memory_recovery.jsonl"
    _edit_line(p, 2, lambda r: r["goals"].__setitem__(0, r["goals"][0] + " Also today."))
    assert any("hash differs" in x for x in verify_suite(suite_copy))
    assert run_cli("scenarios", "check", "--suite", suite_copy) == 1
    _edit_line(p, 2, lambda r: r.update(stage="nonsense"))
    assert run_cli("scenarios", "check", "--suite", suite_copy) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "memory_recovery.jsonl:2" in err and "field 'stage'" in err


def test_generate_unknown_suite_writes_nothing(tmp_path):
    out = tmp_path / "x"
    assert run_cli("scenarios", "generate", "--suite", "nope", "--out", out) == 2
    assert not out.exists()


def test_scenario_id_rule_allows_derived_ids():
    from containmentbench.scenarios.model import Scenario

    line = (ROOT / "scenarios" / "smoke" / "security.jsonl").read_text().splitlines()[0]
    rec = json.loads(line)
    rec["id"] = f"{rec['id']}~0123456789ab"  # attacks/derive.py: <base id>~<sha256[:12]>
    assert Scenario.from_dict(rec).id == rec["id"]
    for bad in ("", ".hidden", "a/b", "a..b", "x" * 129, "a b"):
        rec["id"] = bad
        with pytest.raises(ValidationError) as e:
            Scenario.from_dict(rec)
        assert e.value.field == "id", bad


def test_stage_files_checked_against_the_manifest(suite_copy):
    from containmentbench.errors import BenchError
    from containmentbench.scenarios.manifest import check_stage_files

    check_stage_files(suite_copy)
    p = suite_copy / "clean.jsonl"
    original = p.read_bytes()
    _edit_line(p, 1, lambda r: r["goals"].__setitem__(0, r["goals"][0] + " Now."))
    with pytest.raises(BenchError, match="no longer matches") as e:
        check_stage_files(suite_copy)
    assert e.value.file == str(p)
    check_stage_files(suite_copy, "security")  # the other stages are untouched
    p.write_bytes(original)
    check_stage_files(suite_copy)  # checked afresh once the file changes back
