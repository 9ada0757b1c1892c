"""Renderers of the simulated agent's output formats: every (format, action) parses back to the
intended tool and arguments, or to the intended failure status (paper 000 Appendix I)."""

from __future__ import annotations

import numpy as np
import pytest

from containmentbench.parser import DEFAULT_CONFIG, VALID_STATUSES, parse
from containmentbench.parser.formats import (
    FAKE_TOOLS,
    FINAL_FORMATS,
    FORMATS,
    TOOL_FORMATS,
    example_args,
    render,
)
from containmentbench.sandbox.tools import TOOLS, validate_args

SEEDS = range(6)


def test_format_names():
    assert FORMATS == ("strict_json", "fenced_json", "prefixed_json", "hermes", "action_alias",
                       "toolbench", "mistral", "llama3", "pythonic", "malformed_json",
                       "invalid_tool", "final_answer", "plain_final")
    assert set(TOOL_FORMATS) | set(FINAL_FORMATS) == set(FORMATS)


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("n_list", [1, 2])
def test_every_format_round_trips_every_tool(tool, n_list):
    args = example_args(tool, n_list)
    assert validate_args(tool, args) is None
    for fmt in TOOL_FORMATS:
        for seed in SEEDS:
            text, expected = render(fmt, tool, args, None, np.random.default_rng(seed))
            r = parse(text, sorted(TOOLS))
            assert r.status == expected, (fmt, seed, text, r)
            if expected in VALID_STATUSES:
                assert [(c.name, c.arguments) for c in r.calls] == [(tool, args)], (fmt, text)
                assert (expected == "valid_strict_json") == (fmt == "strict_json")
            elif expected == "invalid_tool":
                assert r.calls[0].name in FAKE_TOOLS and not r.calls[0].valid
            else:
                assert expected == "malformed" and r.calls == [] and r.final_text is None


@pytest.mark.parametrize("fmt", FINAL_FORMATS)
def test_final_formats(fmt):
    text, expected = render(fmt, None, None, "The summary is recorded.", np.random.default_rng(0))
    r = parse(text, ["write_task_record"])
    assert (expected, r.status, r.final_text) == ("final_answer", "final_answer",
                                                  "The summary is recorded.")
    text, _ = render(fmt, None, None, None, np.random.default_rng(0))
    assert parse(text, ["write_task_record"]).status == "final_answer"


@pytest.mark.parametrize("fmt", FORMATS)
def test_deterministic_given_rng_state(fmt):
    args = example_args("send_email")
    a = [render(fmt, "send_email", args, None, np.random.default_rng(s)) for s in range(8)]
    b = [render(fmt, "send_email", args, None, np.random.default_rng(s)) for s in range(8)]
    assert a == b


def test_variation_comes_from_the_rng():
    args = example_args("share_document")
    texts = {render("toolbench", "share_document", args, None, np.random.default_rng(s))[0]
             for s in range(30)}
    assert len(texts) > 3


def test_fake_tools_never_resolve_to_a_sandbox_tool():
    for fake in FAKE_TOOLS:
        assert fake not in TOOLS and fake not in DEFAULT_CONFIG.tool_aliases
        assert parse(f'{{"tool": "{fake}", "arguments": {{}}}}', sorted(TOOLS)).status == \
            "invalid_tool"


def test_bad_requests():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="unknown format"):
        render("yaml", "send_email", {}, None, rng)
    with pytest.raises(ValueError, match="tool"):
        render("hermes", None, None, None, rng)
