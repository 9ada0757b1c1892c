"""Offline reparse of recorded model actions (paper 000 §6.2, Appendix I, Table 24).

Raw completions kept in ``model_call`` events are parsed again with the current parser and
compared with the status recorded at rollout time. The summary carries Table 24's quantities so
that a parser change (or a parser-config change) is measured before any policy comparison:
formatting failures must not silently become benign final answers (§6.2).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from containmentbench.escape import md_cell
from containmentbench.parser.core import (
    PARSER_VERSION,
    STATUSES,
    VALID_STATUSES,
    ParserConfig,
    parse,
)

# Row labels and interpretations of Table 24.
_TABLE24 = (
    ("input_model_actions", "input model actions", "Model actions reprocessed offline."),
    ("valid_tool_proposals_recovered", "valid tool proposals recovered",
     "Valid structured actions that the recorded parse had not produced."),
    ("old_action_like_final_answers", "old action-like final answers",
     "Recorded final answers that the parser now reads as an action attempt."),
    ("new_action_like_final_answers", "new action-like final answers",
     "Of those, attempts still not recovered as a valid tool proposal."),
    ("repaired_parses", "repaired parses", "Non-strict but recoverable JSON/action formats."),
    ("invalid_tool_actions", "invalid tool actions", "Recorded but never executed."),
)


def _tools_of(args: Any) -> list[str] | None:
    """The agent's tool names from a model_call's ``args`` (canonical JSON {"tools": [...]})."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    tools = args.get("tools") if isinstance(args, dict) else None
    return [str(t) for t in tools] if isinstance(tools, (list, tuple)) else None


def reparse_rows(rows: Iterable[dict[str, Any]],
                 config: ParserConfig) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reparse model_call rows; returns (per-action records, Table 24 summary).

    Rows need ``rollout_id``, ``seq``, ``text``, ``parse_status``, ``repaired``, ``repairs`` and
    ``args``. Rows without a recorded ``parse_status`` (provider failures, no completion) are
    not model actions: they are counted in ``skipped_rows`` and otherwise left out.
    """
    records: list[dict[str, Any]] = []
    old_counts: Counter[str] = Counter()
    new_counts: Counter[str] = Counter()
    recovered = old_like = still_like = n_changed = skipped = 0
    for row in rows:
        old_status = row.get("parse_status")
        if old_status is None:
            skipped += 1
            continue
        res = parse(row.get("text") or "", _tools_of(row.get("args")), config)
        old_repairs = [str(r) for r in (row.get("repairs") if row.get("repairs") is not None
                                        else [])]
        old_repaired = bool(row.get("repaired"))
        changed = (res.status != old_status or res.repaired != old_repaired
                   or res.repairs != old_repairs)
        old_counts[old_status] += 1
        new_counts[res.status] += 1
        new_valid = res.status in VALID_STATUSES
        recovered += new_valid and old_status not in VALID_STATUSES
        # An old final answer that the parser now reads as an action attempt (valid, invalid
        # or malformed); "new" counts those still not recovered as a valid proposal (§6.2).
        action_like = old_status == "final_answer" and res.status != "final_answer"
        old_like += action_like
        still_like += action_like and not new_valid
        n_changed += changed
        records.append({
            "rollout_id": row.get("rollout_id"), "seq": row.get("seq"),
            "old_status": old_status, "new_status": res.status,
            "old_repaired": old_repaired, "new_repaired": res.repaired,
            "old_repairs": old_repairs, "new_repairs": list(res.repairs),
            "new_tool": res.calls[0].name if res.calls else None, "new_error": res.error,
            "changed": changed})
    order = {s: i for i, s in enumerate(STATUSES)}

    def _sorted(c: Counter[str]) -> dict[str, int]:
        return {k: c[k] for k in sorted(c, key=lambda s: (order.get(s, len(order)), s))}

    summary = {
        "input_model_actions": len(records),
        "valid_tool_proposals_recovered": recovered,
        "old_action_like_final_answers": old_like,
        "new_action_like_final_answers": still_like,
        "repaired_parses": new_counts["valid_repaired_json"],
        "invalid_tool_actions": new_counts["invalid_tool"],
        "status_counts_old": _sorted(old_counts),
        "status_counts_new": _sorted(new_counts),
        "n_changed": n_changed,
        "skipped_rows": skipped,
        "parser_version": PARSER_VERSION,
        "config_hash": config.config_hash(),
    }
    return records, summary


def summary_markdown(summary: dict[str, Any]) -> str:
    """Render the summary as a Table-24-shaped markdown table (new status counts last)."""
    lines = ["| Quantity | Count | Interpretation |", "| --- | ---: | --- |"]
    for key, label, note in _TABLE24:
        lines.append(f"| {label} | {summary[key]} | {note} |")
    for status, n in summary["status_counts_new"].items():
        lines.append(f"| parse_status={md_cell(str(status))} | {n} | Parser status count. |")
    lines.append("")
    lines.append(f"Parser {summary['parser_version']}, config {summary['config_hash'][:12]}; "
                 f"{summary['n_changed']} of {summary['input_model_actions']} actions changed.")
    return "\n".join(lines) + "\n"
