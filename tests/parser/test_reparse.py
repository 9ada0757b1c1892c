"""Offline reparse (paper 000 §6.2, Appendix I, Table 24): the same config reproduces the
recorded statuses; a changed config reports every difference with Table 24's quantities."""

from __future__ import annotations

import numpy as np
import pytest

from containmentbench.canonical import canonical_json
from containmentbench.parser import (
    DEFAULT_CONFIG,
    PARSER_VERSION,
    ParserConfig,
    parse,
    reparse_rows,
    summary_markdown,
)
from containmentbench.parser.formats import TOOL_FORMATS, example_args, render
from containmentbench.sandbox.tools import TOOLS

AGENT = ["send_email", "read_document", "share_document", "create_event", "write_task_record"]


def _row(i: int, text: str, config: ParserConfig, tools=AGENT) -> dict:
    r = parse(text, tools, config)
    return {"rollout_id": f"r{i // 10}", "seq": i, "text": text, "parse_status": r.status,
            "repaired": r.repaired, "repairs": list(r.repairs),
            "args": canonical_json({"tools": list(tools)})}


def _corpus() -> list[str]:
    texts = []
    for k, tool in enumerate(AGENT):
        for j, fmt in enumerate((*TOOL_FORMATS, "final_answer", "plain_final")):
            rng = np.random.default_rng(100 * k + j)
            texts.append(render(fmt, tool, example_args(tool), "All done.", rng)[0])
    return texts


def test_same_config_reproduces_recorded_statuses():
    rows = [_row(i, t, DEFAULT_CONFIG) for i, t in enumerate(_corpus())]
    records, summary = reparse_rows(rows, DEFAULT_CONFIG)
    assert [r["new_status"] for r in records] == [r["parse_status"] for r in rows]
    assert [r["new_repairs"] for r in records] == [r["repairs"] for r in rows]
    assert not any(r["changed"] for r in records) and summary["n_changed"] == 0
    assert summary["status_counts_old"] == summary["status_counts_new"]
    assert summary["valid_tool_proposals_recovered"] == 0
    assert summary["old_action_like_final_answers"] == 0
    assert summary["parser_version"] == PARSER_VERSION
    assert summary["config_hash"] == DEFAULT_CONFIG.config_hash()
    assert {"rollout_id", "seq", "old_status", "new_status", "old_repaired", "new_repaired",
            "new_repairs", "changed"} <= set(records[0])


@pytest.mark.parametrize("changed", [ParserConfig.strict(), ParserConfig(tool_aliases={}),
                                     DEFAULT_CONFIG.without("fenced_json", "prefixed_text"),
                                     ParserConfig(argument_aliases={})])
def test_changed_config_reports_differences(changed):
    rows = [_row(i, t, DEFAULT_CONFIG) for i, t in enumerate(_corpus())]
    records, summary = reparse_rows(rows, changed)
    diffs = [r for r in records if r["changed"]]
    assert diffs and summary["n_changed"] == len(diffs)
    assert summary["config_hash"] == changed.config_hash() != DEFAULT_CONFIG.config_hash()
    assert summary["status_counts_old"] != summary["status_counts_new"]
    for r in diffs:
        assert (r["old_status"], r["old_repairs"]) != (r["new_status"], r["new_repairs"])


def test_table24_quantities_from_a_legacy_trace():
    """96 actions recorded by the pre-repair parser: 5 strict, 89 recoverable non-strict, 2
    action-like with a schema error (Table 24's new status mix)."""
    tools = list(TOOLS)
    no_subject = '```json\n{"tool": "send_email", "arguments": {"to": "a@b.local"}}\n```'
    texts, rng = [], np.random.default_rng(7)
    repair_formats = [f for f in TOOL_FORMATS if f not in ("strict_json", "malformed_json",
                                                             "invalid_tool")]
    for i in range(96):
        tool = tools[i % len(tools)]
        args = example_args(tool)
        if i < 5:
            texts.append(render("strict_json", tool, args, None, rng)[0])
        elif i < 94:
            texts.append(render(repair_formats[i % len(repair_formats)], tool, args, None, rng)[0])
        else:
            texts.append(no_subject)
    rows = [_row(i, t, ParserConfig.legacy(), tools) for i, t in enumerate(texts)]
    rows.append({**rows[0], "seq": 999, "parse_status": None})  # a provider failure
    assert sum(r["parse_status"] == "final_answer" for r in rows) == 91
    _, s = reparse_rows(rows, DEFAULT_CONFIG)
    assert s["input_model_actions"] == 96 and s["skipped_rows"] == 1
    assert s["status_counts_old"] == {"valid_strict_json": 5, "final_answer": 91}
    assert s["status_counts_new"] == {"valid_strict_json": 5, "valid_repaired_json": 89,
                                      "invalid_schema": 2}
    assert s["valid_tool_proposals_recovered"] == 89
    assert s["old_action_like_final_answers"] == 91
    assert s["new_action_like_final_answers"] == 2
    assert s["repaired_parses"] == 89 and s["invalid_tool_actions"] == 0
    assert s["n_changed"] == 91
    md = summary_markdown(s)
    for line in ("| input model actions | 96 |", "| valid tool proposals recovered | 89 |",
                 "| old action-like final answers | 91 |", "| repaired parses | 89 |",
                 "| invalid tool actions | 0 |", "| parse_status=invalid_schema | 2 |",
                 "| parse_status=valid_repaired_json | 89 |",
                 "| parse_status=valid_strict_json | 5 |"):
        assert line in md
    assert md.splitlines()[0] == "| Quantity | Count | Interpretation |"


def test_rows_without_tools_and_numpy_repairs():
    text = '{"tool": "custom", "arguments": {}}'
    rows = [{"rollout_id": "r", "seq": 1, "text": text, "parse_status": "valid_strict_json",
             "repaired": False, "repairs": np.array([], dtype=object), "args": None},
            {"rollout_id": "r", "seq": 2, "text": None, "parse_status": "empty",
             "repaired": None, "repairs": None, "args": "not json"}]
    records, s = reparse_rows(rows, DEFAULT_CONFIG)
    assert [r["new_status"] for r in records] == ["valid_strict_json", "empty"]
    assert s["n_changed"] == 0
