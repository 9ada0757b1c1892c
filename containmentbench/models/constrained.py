"""``tool_mode: constrained``: decoding limited to one valid action of the request's tools.

The prompt is that of ``prompt`` mode (our JSON action format, the schemas once in the system
prompt); the engine's structured-output decoder then only emits text matching
:func:`action_schema`: ``{"tool": <one of the request's tools>, "arguments": {...}}`` with that
tool's own argument schema, or ``{"final_answer": "<text>"}``. The same schema goes to vLLM's
structured outputs (``StructuredOutputsParams(json=...)``) and, over HTTP, to the server's
``response_format`` (``{"type": "json_schema", ...}``), so both backends constrain alike.

Properties keep the prompt's order (``tool`` before ``arguments``, a tool's parameters in
their declared order): decoders such as xgrammar emit properties in schema order, and a
schema whose keys were sorted made Qwen2.5-Coder-0.5B answer every first step with a final
answer rather than start an action with ``{"arguments"``.

A parameter whose schema enumerates its values (an agent tool's reachable agent ids) keeps
that enum, so the decoder can only name an agent the caller can reach.

Strings have length bounds, so a model that would otherwise loop inside a string cannot
run to ``max_tokens`` unchecked (a completion cut at ``max_tokens`` is still recorded as
``truncated``, never as an action). Arguments carry no ``additionalProperties``, so the parser
sees exactly the tool's parameters; the constraint decides the *shape* of the reply, never
its content, and the policies still judge every proposed call.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

#: bounds on generated strings (characters); content fields may be a paragraph
MAX_CONTENT = 600
MAX_FIELD = 160
MAX_FINAL = 400
MAX_ITEMS = 8


def _arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    props = {}
    for name, p in (parameters.get("properties") or {}).items():
        if p.get("enum"):  # an agent tool's reachable ids (sandbox/tools.py: ToolSpec.schema)
            props[name] = {"type": "string", "enum": list(p["enum"])}
        elif p.get("type") == "array":
            props[name] = {"type": "array", "maxItems": MAX_ITEMS,
                           "items": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD}}
        else:
            long = name in ("body", "text", "value", "summary", "task", "note")
            props[name] = {"type": "string", "maxLength": MAX_CONTENT if long else MAX_FIELD}
    return {"type": "object", "properties": props,
            "required": list(parameters.get("required") or []), "additionalProperties": False}


@lru_cache(maxsize=256)
def _schema(tools_json: str) -> str:
    tools = json.loads(tools_json)
    options = [{"type": "object",
                "properties": {"tool": {"type": "string", "enum": [t["name"]]},
                               "arguments": _arguments(t.get("parameters") or {})},
                "required": ["tool", "arguments"], "additionalProperties": False}
               for t in tools]
    options.append({"type": "object",
                    "properties": {"final_answer": {"type": "string", "minLength": 1,
                                                    "maxLength": MAX_FINAL}},
                    "required": ["final_answer"], "additionalProperties": False})
    # NOT sorted: structured-output decoders emit properties in schema order, and the model
    # writes {"tool": ..., "arguments": ...} (the prompt's action format); sorted keys would
    # force {"arguments" first and push a small model to the final-answer branch
    return json.dumps({"anyOf": options})


def action_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one action over ``tools`` (the request's tool schemas: name,
    description, parameters) or a final answer."""
    return json.loads(_schema(json.dumps(tools)))  # key order kept (see _schema)


def response_format(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The OpenAI ``response_format`` carrying :func:`action_schema`."""
    return {"type": "json_schema",
            "json_schema": {"name": "action", "schema": action_schema(tools), "strict": True}}
