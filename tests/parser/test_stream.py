"""JSON-lines parsing: one output line per input line; bad lines stop with a one-line error."""

from __future__ import annotations

import io
import json

import pytest

from containmentbench.errors import ValidationError
from containmentbench.parser import parse_stream

CALL = '{"tool": "read_document", "arguments": {"doc_id": "d1"}}'


def _run(lines: list[str]) -> tuple[int, list[dict]]:
    out = io.StringIO()
    n = parse_stream(io.StringIO("\n".join(lines) + "\n"), out)
    return n, [json.loads(x) for x in out.getvalue().splitlines()]


def test_one_output_line_per_input_line():
    n, rows = _run([json.dumps({"text": CALL, "tools": ["read_document"]}),
                    "",
                    json.dumps({"text": "```json\n" + CALL + "\n```"}),
                    json.dumps({"text": CALL, "tools": ["send_email"]}),
                    json.dumps({"text": "All done."}),
                    json.dumps({"text": CALL, "tools": {"read_document": {
                        "type": "object", "properties": {"doc_id": {"type": "string"}},
                        "required": ["doc_id"]}}})])
    assert n == 5 and len(rows) == 5
    assert rows[0] == {"calls": [{"name": "read_document", "arguments": {"doc_id": "d1"}}],
                       "status": "valid_strict_json", "repaired": False, "repairs": []}
    assert (rows[1]["status"], rows[1]["repairs"]) == ("valid_repaired_json", ["fenced_json"])
    assert rows[2]["status"] == "invalid_tool" and rows[2]["error"] == \
        "unknown tool 'read_document'"
    assert rows[3] == {"calls": [], "status": "final_answer", "repaired": False, "repairs": [],
                       "final_text": "All done."}
    assert rows[4]["status"] == "valid_strict_json"


@pytest.mark.parametrize(("lines", "line", "field"), [
    (["{not json"], 1, "text"),
    ([json.dumps({"text": CALL}), json.dumps({"tools": []})], 2, "text"),
    ([json.dumps({"text": 5})], 1, "text"),
    ([json.dumps(["text"])], 1, "text"),
    ([json.dumps({"text": CALL, "tools": "read_document"})], 1, "tools"),
])
def test_bad_lines_raise_one_line_errors(lines, line, field):
    with pytest.raises(ValidationError) as exc:
        _run(lines)
    assert exc.value.line == line and exc.value.field == field
    msg = str(exc.value)
    assert "\n" not in msg and f"<stdin>:{line}" in msg and f"field '{field}'" in msg
