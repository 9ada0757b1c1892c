"""tool_mode constrained: one JSON schema of the request's tools plus a final answer, with
string bounds, sent to vLLM's structured outputs and to OpenAI-compatible servers."""

from __future__ import annotations

import json

import jsonschema
import pytest

from containmentbench.models.constrained import MAX_FINAL, action_schema, response_format
from containmentbench.parser import VALID_STATUSES, parse
from containmentbench.runtime.prompts import tool_schemas

TOOLS = ("send_email", "read_document", "memory_list")


def _valid(obj) -> bool:
    try:
        jsonschema.validate(obj, action_schema(list(tool_schemas(TOOLS))))
        return True
    except jsonschema.ValidationError:
        return False


def test_schema_admits_exactly_one_action_or_a_final_answer():
    assert _valid({"tool": "send_email", "arguments": {"to": "a@corp.local", "subject": "s",
                                                       "body": "b"}})
    assert _valid({"tool": "memory_list", "arguments": {}})
    assert _valid({"final_answer": "Done."})
    assert not _valid({"tool": "wire_money", "arguments": {}})            # not a tool here
    assert not _valid({"tool": "send_email", "arguments": {"to": "a"}})   # required args
    assert not _valid({"tool": "read_document", "arguments": {"doc_id": "d", "x": "y"}})
    assert not _valid({"final_answer": "x" * (MAX_FINAL + 1)})           # runaway strings
    assert not _valid({"final_answer": ""})
    assert not _valid({"tool": "memory_list", "arguments": {}, "final_answer": "both"})


@pytest.mark.parametrize("obj", [
    {"tool": "send_email", "arguments": {"to": "a@corp.local", "subject": "s", "body": "b"}},
    {"final_answer": "Done."}])
def test_what_the_schema_admits_our_parser_reads_as_valid(obj):
    r = parse(json.dumps(obj), TOOLS)
    assert r.status in VALID_STATUSES | {"final_answer"}


def test_http_payload_carries_the_schema_and_no_tools():
    from containmentbench.models.base import BackendConfig, GenerationRequest
    from containmentbench.models.openai_backend import OpenAIBackend

    b = OpenAIBackend(BackendConfig("openai", "m", tool_mode="constrained",
                                    options={"seed_supported": False}))
    req = GenerationRequest("r", [{"role": "user", "content": "hi"}], list(tool_schemas(TOOLS)),
                            seed=3, temperature=0.7, tool_mode="constrained")
    body = b.payload(req)
    assert "tools" not in body
    assert body["response_format"] == response_format(list(tool_schemas(TOOLS)))
    assert body["response_format"]["json_schema"]["schema"] == \
        action_schema(list(tool_schemas(TOOLS)))


def test_properties_keep_the_prompts_order():
    """Decoders emit properties in schema order: the action must start with "tool", as the
    prompt's format does, and arguments follow the tool's declared parameter order."""
    schema = action_schema(list(tool_schemas(TOOLS)))
    send = next(o for o in schema["anyOf"] if o["properties"].get("tool", {}).get("enum")
                == ["send_email"])
    assert list(send["properties"]) == ["tool", "arguments"]
    assert list(send["properties"]["arguments"]["properties"]) == ["to", "subject", "body", "cc"]
    assert list(response_format(list(tool_schemas(TOOLS)))["json_schema"]["schema"]
                ["anyOf"][0]["properties"]) == ["tool", "arguments"]
