"""Formats real models emit (issue: Mistral tokenizer v11, Llama 4 python tags, ReAct
``Action: None``): each round-trips for every sandbox tool, several calls per completion work,
and the simulated agent's format mix is unchanged by them."""

from __future__ import annotations

import numpy as np
import pytest

from containmentbench.parser import VALID_STATUSES, ParserConfig, parse
from containmentbench.parser.formats import (
    FORMATS,
    REAL_MODEL_FORMATS,
    example_args,
    render,
)
from containmentbench.sandbox.tools import TOOLS


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("fmt", ["mistral_v11", "llama4_pythonic"])
def test_real_formats_round_trip_every_tool(tool, fmt):
    args = example_args(tool, 2)
    text, expected = render(fmt, tool, args, None, np.random.default_rng(0))
    r = parse(text, sorted(TOOLS))
    assert expected in VALID_STATUSES and r.status == expected, (text, r)
    assert [(c.name, c.arguments) for c in r.calls] == [(tool, args)]
    assert {"mistral_v11": "mistral_v11_tool_calls",
            "llama4_pythonic": "llama4_python_tag"}[fmt] in r.repairs


def test_mistral_v11_repeated_calls_in_order():
    text = ('[TOOL_CALLS]read_file{"path": "notes/q3.txt"}'
            '[TOOL_CALLS]send_email{"to": ["a@corp.local"], "subject": "Q3", "body": "see {x}"}')
    r = parse(text, sorted(TOOLS), ParserConfig(max_calls=4))
    assert [c.name for c in r.calls] == ["read_file", "send_email"]
    assert r.calls[1].arguments["body"] == "see {x}"  # braces inside strings are not spans
    # the [ARGS] separator of some v11 releases
    r = parse('[TOOL_CALLS]read_file[ARGS]{"path": "a.txt"}', sorted(TOOLS))
    assert [(c.name, c.arguments) for c in r.calls] == [("read_file", {"path": "a.txt"})]
    # the older list form still parses
    r = parse('[TOOL_CALLS] [{"name": "read_file", "arguments": {"path": "a.txt"}}]',
              sorted(TOOLS))
    assert [(c.name, c.arguments) for c in r.calls] == [("read_file", {"path": "a.txt"})]


def test_llama4_several_calls_and_unknown_tool():
    text = ('<|python_start|>[read_file(path="a.txt"), read_file(path="b.txt")]'
            "<|python_end|>")
    r = parse(text, sorted(TOOLS), ParserConfig(max_calls=4))
    assert [c.arguments["path"] for c in r.calls] == ["a.txt", "b.txt"]
    r = parse('<|python_start|>[wire_money(amount=5)]<|python_end|>', sorted(TOOLS))
    assert r.status == "invalid_tool"
    # an unclosed block (a max_tokens cut) that still holds a whole call
    r = parse('<|python_start|>[read_file(path="a.txt")]', sorted(TOOLS))
    assert [c.name for c in r.calls] == ["read_file"]


def test_react_action_none_is_no_call():
    r = parse("Thought: the report is already sent.\nAction: None", sorted(TOOLS))
    assert (r.status, r.calls, r.final_text) == ("final_answer", [],
                                                 "the report is already sent.")
    assert r.repairs == ["react_no_action"]
    r = parse("Thought: done.\nAction: none\nFinal Answer: Nothing left to do.", sorted(TOOLS))
    assert (r.status, r.final_text) == ("final_answer", "Nothing left to do.")
    text, expected = render("react_none", None, None, "All done.", np.random.default_rng(0))
    assert expected == parse(text, sorted(TOOLS)).status == "final_answer"
    # a real action named like a tool is still a call
    r = parse('Action: read_file\nAction Input: {"path": "a.txt"}', sorted(TOOLS))
    assert [c.name for c in r.calls] == ["read_file"]


def test_simulated_agent_formats_unchanged():
    assert not set(REAL_MODEL_FORMATS) & set(FORMATS)
