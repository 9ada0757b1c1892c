"""Parse a JSON-lines stream of completions (the ``parse`` CLI verb and offline checks).

Input lines are ``{"text": ..., "tools": [...]}`` (``tools`` optional: names or a name ->
schema object); each produces one output line ``{"calls", "status", "repaired", "repairs"}``
plus ``error`` and ``final_text`` when set. Bad input stops with a one-line
:class:`~containmentbench.errors.ValidationError` naming the line and field.
"""

from __future__ import annotations

import json
from typing import TextIO

from containmentbench.errors import ValidationError
from containmentbench.parser.core import DEFAULT_CONFIG, ParserConfig, parse


def parse_stream(inp: TextIO, out: TextIO, config: ParserConfig = DEFAULT_CONFIG, *,
                 source: str = "<stdin>") -> int:
    """Parse every non-blank JSON line of ``inp`` into ``out``; returns the lines processed."""
    n = 0
    for lineno, line in enumerate(inp, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ValidationError(f"line is not valid JSON ({exc.msg})", file=source,
                                  line=lineno, field="text") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise ValidationError("each line needs a string 'text'", file=source, line=lineno,
                                  field="text")
        tools = obj.get("tools")
        if tools is not None and not isinstance(tools, (list, dict)):
            raise ValidationError("'tools' must be a list of names or an object of schemas",
                                  file=source, line=lineno, field="tools")
        result = parse(obj["text"], tools, config)
        out.write(json.dumps(result.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
        n += 1
    return n
