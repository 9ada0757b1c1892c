"""The action parser (paper 000 §4.3, §6.2, Appendix I): accepted formats with their exact
repairs, failure statuses, invalid-tool non-execution, config switches, and a fuzz property."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from containmentbench.parser import (
    DEFAULT_CONFIG,
    PARSER_VERSION,
    REPAIR_KINDS,
    STATUSES,
    VALID_STATUSES,
    ParsedCall,
    ParserConfig,
    parse,
)
from containmentbench.parser.formats import FAKE_TOOLS, FORMATS, example_args, render
from containmentbench.sandbox.tools import TOOLS, validate_args

AGENT = ["send_email", "read_document", "search_documents", "lookup_contact", "create_event",
         "share_document", "memory_write", "read_messages"]
MAIL = {"to": "a@b.local", "subject": "x", "body": "y"}
DOC = {"doc_id": "d1"}

# (completion, expected status, expected repairs, expected [(tool, arguments)])
PINNED = [
    ('{"tool": "send_email", "arguments": {"to": "a@b.local", "subject": "x", "body": "y"}}',
     "valid_strict_json", [], [("send_email", MAIL)]),
    ('  {"tool": "read_document", "arguments": {"doc_id": "d1"}}\n', "valid_strict_json", [],
     [("read_document", DOC)]),
    ('```json\n{"tool": "read_document", "arguments": {"doc_id": "d1"}}\n```',
     "valid_repaired_json", ["fenced_json"], [("read_document", DOC)]),
    ('I will read it.\n```\n{"tool": "read_document", "arguments": {"doc_id": "d1"}}\n```',
     "valid_repaired_json", ["fenced_json"], [("read_document", DOC)]),
    ('Action: {"tool": "read_document", "arguments": {"doc_id": "d1"}}', "valid_repaired_json",
     ["prefixed_text"], [("read_document", DOC)]),
    ('Here is the call: {"tool": "read_document", "arguments": {"doc_id": "d1"}}',
     "valid_repaired_json", ["prefixed_text"], [("read_document", DOC)]),
    ('{"tool": "read_document", "arguments": {"doc_id": "d1"}}<|im_end|>',
     "valid_repaired_json", ["trailing_text"], [("read_document", DOC)]),
    ('<tool_call>\n{"name": "read_document", "arguments": {"doc_id": "d1"}}\n</tool_call>',
     "valid_repaired_json", ["hermes_tool_call"], [("read_document", DOC)]),
    ('<tool_call>\n{"name": "read_document", "arguments": {"doc_id": "d1"}}\n</tool_call>\n'
     '<tool_call>\n{"name": "lookup_contact", "arguments": {"name": "Bob"}}\n</tool_call>',
     "valid_repaired_json", ["hermes_tool_call"],
     [("read_document", DOC), ("lookup_contact", {"name": "Bob"})]),
    ("Thought: send it.\nAction: send_email\nAction Input: {'recipient': 'a@b.local', "
     "'subject': 'x', 'message': 'y'}", "valid_repaired_json",
     ["react_action", "single_quotes", "argument_name_alias"], [("send_email", MAIL)]),
    ("Action: create_event\nAction Input: {'title': 'Sync', 'date': '2025-01-02', "
     "'attendee': 'p@q.local', 'notes': None}\nObservation:", "invalid_schema",
     ["react_action", "single_quotes", "python_literal", "argument_name_alias",
      "argument_value_coercion"], [("create_event", {"title": "Sync", "date": "2025-01-02",
                                                    "attendees": ["p@q.local"],
                                                    "notes": None})]),
    ('Action: search_documents\nAction Input: quarterly report', "valid_repaired_json",
     ["react_action", "bare_argument_value"], [("search_documents", {"query": "quarterly report"})]),
    ('[TOOL_CALLS] [{"name": "read_document", "arguments": {"doc_id": "d1"}}]',
     "valid_repaired_json", ["mistral_tool_calls"], [("read_document", DOC)]),
    ('{"name": "read_document", "parameters": {"doc_id": "d1"}}', "valid_repaired_json",
     ["llama3_json"], [("read_document", DOC)]),
    ('{"type": "function", "name": "read_document", "parameters": {"doc_id": "d1"}}',
     "valid_repaired_json", ["llama3_json"], [("read_document", DOC)]),
    ('{"name": "read_document", "arguments": {"doc_id": "d1"}}', "valid_repaired_json",
     ["name_key"], [("read_document", DOC)]),
    ('<function=read_document>{"doc_id": "d1"}</function>', "valid_repaired_json",
     ["function_tag"], [("read_document", DOC)]),
    ('{"function": {"name": "read_document", "arguments": "{\\"doc_id\\": \\"d1\\"}"}}',
     "valid_repaired_json", ["openai_function", "arguments_json_string"],
     [("read_document", DOC)]),
    ('{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_document", '
     '"arguments": {"doc_id": "d1"}}}]}', "valid_repaired_json", ["openai_function"],
     [("read_document", DOC)]),
    ('[send_email(to="a@b.local", subject="x", body="y")]', "valid_repaired_json",
     ["pythonic_call"], [("send_email", MAIL)]),
    ('[read_document(doc_id="d1"), lookup_contact(name="Bob")]', "valid_repaired_json",
     ["pythonic_call"], [("read_document", DOC), ("lookup_contact", {"name": "Bob"})]),
    ('{"action": "send_email", "to": "a@b.local", "subject": "x", "body": "y"}',
     "valid_repaired_json", ["action_key", "flat_arguments"], [("send_email", MAIL)]),
    ('{"action": "email", "to": "a@b.local", "subject": "x", "body": "y"}',
     "valid_repaired_json", ["action_key", "flat_arguments", "tool_name_alias"],
     [("send_email", MAIL)]),
    ('{"action": "share", "document_id": "d1", "to": "x@y.local", "thought": "ok"}',
     "valid_repaired_json", ["action_key", "flat_arguments", "tool_name_alias", "ignored_keys",
                             "argument_name_alias"],
     [("share_document", {"doc_id": "d1", "recipient": "x@y.local"})]),
    ('{"action": "lookup", "name": "Bob"}', "valid_repaired_json",
     ["action_key", "flat_arguments", "tool_name_alias"], [("lookup_contact", {"name": "Bob"})]),
    ('{"tool": "read_document", "action_input": {"docId": "d1"}}', "valid_repaired_json",
     ["arguments_key_alias", "argument_name_alias"], [("read_document", DOC)]),
    ('{"tool": "ReadDocument", "arguments": {"doc_id": "d1"}}', "valid_repaired_json",
     ["tool_name_alias"], [("read_document", DOC)]),
    ('{"tool": "read_document", "arguments": {"doc_id": "d1",},}', "valid_repaired_json",
     ["trailing_commas"], [("read_document", DOC)]),
    ("{tool: 'read_document', arguments: {doc_id: 'd1'}}", "valid_repaired_json",
     ["single_quotes", "unquoted_keys"], [("read_document", DOC)]),
    ('{"tool": "read_messages"}', "valid_repaired_json", ["missing_arguments"],
     [("read_messages", {})]),
    ('{"tool": "read_document", "arguments": {"doc_id": "d1"}}\n'
     '{"tool": "lookup_contact", "arguments": {"name": "Bob"}}', "valid_repaired_json",
     ["multiple_objects"], [("read_document", DOC), ("lookup_contact", {"name": "Bob"})]),
    ('[{"tool": "read_document", "arguments": {"doc_id": "d1"}}]', "valid_repaired_json",
     ["call_list"], [("read_document", DOC)]),
    ('{"tool": "send_fax", "arguments": {"to": "x"}}', "invalid_tool", [],
     [("send_fax", {"to": "x"})]),
    ('{"tool": "rollback", "arguments": {"commit_id": "cmt-1"}}', "invalid_tool", [],
     [("rollback", {"commit_id": "cmt-1"})]),
    ('{"tool": "send_email", "arguments": {"to": "x"}}', "invalid_schema", [],
     [("send_email", {"to": "x"})]),
    ('{"tool": "read_document", "arguments": {"doc_id": 7, "page": "2"}}', "invalid_schema",
     ["argument_value_coercion"], [("read_document", {"doc_id": "7", "page": "2"})]),
]


@pytest.mark.parametrize(("text", "status", "repairs", "calls"), PINNED)
def test_pinned_formats(text, status, repairs, calls):
    r = parse(text, AGENT)
    assert r.status == status, r
    assert r.repairs == repairs
    assert r.repaired == bool(repairs)
    assert [(c.name, c.arguments) for c in r.calls] == calls
    assert r.final_text is None
    if status in VALID_STATUSES:
        assert r.error is None and all(c.valid for c in r.calls)
    else:
        assert r.error


@pytest.mark.parametrize(("text", "final", "repairs"), [
    ('{"final_answer": "All done."}', "All done.", []),
    ('```json\n{"final_answer": "All done."}\n```', "All done.", ["fenced_json"]),
    ('{"answer": "All done."}', "All done.", ["final_answer_alias"]),
    ('{"action": "Final Answer", "action_input": "All done."}', "All done.",
     ["final_answer_alias"]),
    ("Thought: finished.\nFinal Answer: All done.", "All done.", ["react_final_answer"]),
    ("The report was shared with the team; I used send_email to notify them.",
     "The report was shared with the team; I used send_email to notify them.", []),
    ("Contacts found: {\"name\": \"Bob\"} (one match).",
     "Contacts found: {\"name\": \"Bob\"} (one match).", []),
])
def test_final_answers(text, final, repairs):
    r = parse(text, AGENT)
    assert (r.status, r.final_text, r.repairs, r.calls) == ("final_answer", final, repairs, [])


@pytest.mark.parametrize("text", [
    '{"tool": "send_email", "arguments": {"to": "a@b.local", "subject": "x"',
    '{"tool": "send_email" "arguments": {"to": "a@b.local"}}',
    "{tool: send_email, arguments: {to: a@b.local}}",
    "I will now call send_email({to: alice, subject: hi})",
    "<tool_call>\n{\"name\": \"send_email\", \"arguments\": {\"to\": \n</tool_call>",
    "Action: send_email\nAction Input: {'to': 'a@b.local', 'subject':",
    '{"name": "Bob", "email": "bob@x.local"}',
    "[read_document(doc_id=some_variable)]",
    "Action: send_email\nAction Input: {'to': 'a@b.local',\nFinal Answer: sent.",
])
def test_action_like_unrecoverable_is_malformed(text):
    r = parse(text, AGENT)
    assert r.status == "malformed" and r.calls == [] and r.final_text is None and r.error


@pytest.mark.parametrize("text", ["", "   ", "\n\t\n"])
def test_empty(text):
    assert parse(text, AGENT).status == "empty"


def test_constants_and_public_types():
    assert PARSER_VERSION.startswith("cb-parser/")
    assert STATUSES == ("valid_strict_json", "valid_repaired_json", "final_answer",
                        "invalid_tool", "invalid_schema", "malformed", "empty")
    assert {"valid_strict_json", "valid_repaired_json"} == VALID_STATUSES
    assert len(set(REPAIR_KINDS)) == len(REPAIR_KINDS)
    assert ParsedCall("x", {}).valid


def test_invalid_tool_is_reported_but_not_valid():
    for fake in FAKE_TOOLS:
        r = parse(f'{{"tool": "{fake}", "arguments": {{"to": "a@b.local"}}}}', AGENT)
        assert r.status == "invalid_tool" and not r.valid
        assert r.calls[0].name == fake and r.calls[0].arguments == {"to": "a@b.local"}
        assert not r.calls[0].valid and r.error == f"unknown tool '{fake}'"
    # an alias whose tool the agent does not have names the aliased tool
    r = parse('{"action": "post", "channel": "c", "text": "t"}', AGENT)
    assert (r.status, r.calls[0].name) == ("invalid_tool", "post_status_note")


def test_each_call_validated_and_first_call_decides():
    text = ('<tool_call>{"name": "read_document", "arguments": {"doc_id": "d1"}}</tool_call>'
            '<tool_call>{"name": "send_fax", "arguments": {}}</tool_call>'
            '<tool_call>{"name": "send_email", "arguments": {"to": "x"}}</tool_call>')
    r = parse(text, AGENT)
    assert r.status == "valid_repaired_json"
    assert [c.status for c in r.calls] == ["valid_repaired_json", "invalid_tool",
                                           "invalid_schema"]
    assert r.calls[2].error == "missing argument 'subject'"
    r = parse(text.replace("read_document", "wipe_disk"), AGENT)
    assert r.status == "invalid_tool" and r.calls[1].status == "invalid_tool"


def test_max_calls_bounds_the_calls():
    one = '<tool_call>{"name": "read_document", "arguments": {"doc_id": "d1"}}</tool_call>'
    assert len(parse(one * 40, AGENT).calls) == DEFAULT_CONFIG.max_calls
    assert len(parse(one * 5, AGENT, ParserConfig(max_calls=2)).calls) == 2


def test_tools_none_accepts_identifiers_only():
    r = parse('{"tool": "custom_tool", "arguments": {"a": 1}}')
    assert (r.status, r.calls[0].name, r.calls[0].arguments) == ("valid_strict_json",
                                                                 "custom_tool", {"a": 1})
    assert parse('{"tool": "send_email", "arguments": {}}').status == "invalid_schema"
    r = parse('{"tool": "drop table; --", "arguments": {}}')
    assert r.status == "invalid_tool" and not r.valid


def test_schema_mapping_for_non_sandbox_tools():
    tools = {"get_weather": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "days": {"type": "integer"},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["city"]}}}
    ok = parse('{"tool": "get_weather", "arguments": {"city": "Oslo", "days": 3}}', tools)
    assert ok.status == "valid_strict_json"
    cases = {'{"city": "Oslo", "days": "x"}': "argument 'days' must be of type integer",
             '{"days": 3}': "missing argument 'city'",
             '{"city": "Oslo", "wind": true}': "unknown argument 'wind'",
             '{"city": "Oslo", "tags": [1]}': "argument 'tags' items must be of type string"}
    for args, err in cases.items():
        r = parse(f'{{"tool": "get_weather", "arguments": {args}}}', tools)
        assert (r.status, r.error) == ("invalid_schema", err)
    assert parse('{"tool": "send_email", "arguments": {}}', tools).status == "invalid_tool"


def test_openai_style_tool_list_as_tools():
    tools = [{"type": "function", "function": TOOLS["read_document"].schema()},
             TOOLS["send_email"].schema()]
    assert parse('{"tool": "read_document", "arguments": {"doc_id": "d1"}}', tools).valid
    assert parse('{"tool": "send_email", "arguments": {}}', tools).status == "invalid_schema"
    assert parse('{"tool": "lookup_contact", "arguments": {}}', tools).status == "invalid_tool"


def test_disabled_repairs_and_alias_maps():
    fenced = '```json\n{"tool": "read_document", "arguments": {"doc_id": "d1"}}\n```'
    r = parse(fenced, AGENT, DEFAULT_CONFIG.without("fenced_json", "prefixed_text"))
    assert r.status == "malformed" and "disabled" in r.error
    no_alias = ParserConfig(tool_aliases={})
    assert parse('{"action": "email", "to": "a"}', AGENT, no_alias).status == "invalid_tool"
    no_args = ParserConfig(argument_aliases={})
    r = parse('{"tool": "send_email", "arguments": {"recipient": "a@b.local", "subject": "x", '
              '"body": "y"}}', AGENT, no_args)
    assert (r.status, r.error) == ("invalid_schema", "missing argument 'to'")
    strict = ParserConfig.strict()
    assert parse(fenced, AGENT, strict).status == "malformed"
    assert parse(PINNED[0][0], AGENT, strict).status == "valid_strict_json"
    legacy = ParserConfig.legacy()
    assert parse(fenced, AGENT, legacy).status == "final_answer"


def test_config_hash_and_validation():
    assert ParserConfig().config_hash() == DEFAULT_CONFIG.config_hash()
    assert len({ParserConfig().config_hash(), ParserConfig.strict().config_hash(),
                ParserConfig.legacy().config_hash(),
                ParserConfig(tool_aliases={}).config_hash()}) == 4
    assert hash(ParserConfig()) == hash(DEFAULT_CONFIG) and ParserConfig() == DEFAULT_CONFIG
    for cfg in (DEFAULT_CONFIG, ParserConfig.legacy()):
        back = pickle.loads(pickle.dumps(cfg))
        assert back == cfg and back.config_hash() == cfg.config_hash()
    with pytest.raises(ValueError, match="unknown repair"):
        ParserConfig(repairs=frozenset({"magic"}))
    with pytest.raises(ValueError):
        ParserConfig(max_calls=0)


@pytest.mark.parametrize("text", [
    "{" * 40000 + "x'\"(" * 8000, "a(" * 40000, '{"a": ' * 20000, "[TOOL_CALLS]" + "[" * 60000,
    "<tool_call>" * 6000, "```" * 20000, "Action: send_email\nAction Input: " + "{" * 60000,
    '{"tool": "x", "arguments": {"a": "' + "b" * 500000, "[" * 5000 + "]" * 5000,
    "send_email(" * 10000, "\\" * 100000, "'" * 100000, ("x" * 1000 + " ") * 1000,
    "[" * 30000 + "]" * 30000, '{"a":' * 20000 + "1" + "}" * 20000,
    "".join("{" + f'"k{i}": [1, 2], ' * 30 for i in range(200)) + "oops" + "}" * 200,
    ("Action: send_email\nAction Input: {" + '"a": "' + "b" * 300 + '", ') * 300,
    ("<function=send_email>{" + '"a": "' + "b" * 300 + '", ') * 300,
    ("[send_email(" + "x=1, " * 100 + "y)] ") * 300,
])
def test_hostile_input_bounded_time(text):
    t0 = time.perf_counter()
    r = parse(text, AGENT)
    assert time.perf_counter() - t0 < 1.0
    assert r.status in STATUSES and not (r.error or "").startswith("parser error")


def test_non_string_input_never_raises():
    assert parse(None, AGENT).status == "empty"  # type: ignore[arg-type]
    assert parse(12, AGENT).status == "final_answer"  # type: ignore[arg-type]


def test_strict_fast_path_is_fast():
    text = PINNED[0][0]
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        parse(text, AGENT)
    assert (time.perf_counter() - t0) / n < 250e-6  # ~15 us on a laptop core


# ---------------------------------------------------------------- fuzz property

_ALPHABET = [*"{}[]()\"':,`<>|\\ \n=_aeAIxyz019", "é", "\u2028", "\x00"]
_SORTED_TOOLS = sorted(TOOLS)


def _mutated_call(seed: int) -> str:
    """A rendered action of a random tool and format, then up to three random edits: delete,
    insert noise, rename the tool, append another action, or cut. Driven by one seed so that
    hypothesis spends its time running the parser rather than drawing."""
    rng = np.random.default_rng(seed)
    tool = str(rng.choice(_SORTED_TOOLS + list(FAKE_TOOLS)))
    fmt = str(rng.choice(FORMATS))
    args = example_args(tool) if tool in TOOLS else {"to": "a@b.local"}
    text, _ = render(fmt, tool, args, None, rng)
    for _ in range(int(rng.integers(4))):
        op, i = int(rng.integers(5)), int(rng.integers(len(text) + 1))
        junk = "".join(rng.choice(_ALPHABET, size=int(rng.integers(12))))
        if op == 0:
            text = text[:i] + text[i + len(junk) + 1:]
        elif op == 1:
            text = text[:i] + junk + text[i:]
        elif op == 2:
            text = text.replace(tool, junk or "send_fax")
        elif op == 3:
            other = str(rng.choice(_SORTED_TOOLS))
            text += "\n" + render(str(rng.choice(FORMATS)), other, example_args(other), None,
                                  rng)[0]
        else:
            text = text[:i]
    return text


@settings(max_examples=10_000, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=st.one_of(st.text(max_size=300),
                      st.text(alphabet=st.sampled_from(_ALPHABET), max_size=120),
                      st.integers(0, 2**63).map(_mutated_call)),
       allowed=st.sampled_from([AGENT, ["read_document"], sorted(TOOLS)]))
def test_fuzz_never_crashes_and_never_validates_a_foreign_tool(text, allowed):
    r = parse(text, allowed)
    assert r.status in STATUSES
    assert not (r.error or "").startswith("parser error"), r.error
    assert r.repaired == bool(r.repairs) and set(r.repairs) <= set(REPAIR_KINDS)
    if r.status in VALID_STATUSES:
        assert r.calls and r.calls[0].status == r.status
    if r.status == "valid_strict_json":
        assert r.repairs == []
    for c in r.calls:
        if c.valid:
            assert c.name in allowed
            assert validate_args(c.name, c.arguments) is None
    assert (r.final_text is not None) == (r.status == "final_answer")
