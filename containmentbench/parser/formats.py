"""Renderers for the output formats the simulated agent emits (paper 000 Appendix I).

Each format reproduces one way real models deviate from the canonical action format, so the
simulated agent exercises the same parser repairs as a real model. ``render`` returns the
completion text and the parse status it is meant to produce; every (format, action) pair parses
back to the intended tool and arguments, after alias normalization, or to the intended failure
status (tested in ``tests/parser/test_formats.py``). Choices (which prefix sentence, which alias)
come only from the given generator, so output is deterministic given its state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from containmentbench.parser.core import DEFAULT_ARGUMENT_ALIASES, DEFAULT_TOOL_ALIASES
from containmentbench.sandbox.tools import TOOLS

TOOL_FORMATS = ("strict_json", "fenced_json", "prefixed_json", "hermes", "action_alias",
                "toolbench", "mistral", "llama3", "pythonic", "malformed_json", "invalid_tool")
FINAL_FORMATS = ("final_answer", "plain_final")
FORMATS = TOOL_FORMATS + FINAL_FORMATS
# Formats of real models that the simulated agent does not emit (its format mix, and so its
# figures, stay as they were): Mistral tokenizer v11, Llama 4 python tags, ReAct "Action: None".
REAL_MODEL_FORMATS = ("mistral_v11", "llama4_pythonic", "react_none")

# Plausible tools that no agent has; none is an alias of a sandbox tool.
FAKE_TOOLS = ("send_fax", "export_contacts", "delete_file", "upload_file", "wire_transfer",
              "run_shell", "post_to_web", "forward_all_emails", "grant_access",
              "download_attachment")

_PREFIXES = ("Action:", "Here is the call:", "I will use the {tool} tool now.",
             "Next step: call {tool}.", "To continue with the task I need one tool call.")
_LEADS = ("", "I'll call the tool.\n\n", "Calling {tool}:\n")
_THOUGHTS = ("I need to use {tool} for the next step.", "The next step needs {tool}.",
             "Let me call {tool}.")
_FINALS = ("The task is complete and the summary has been recorded.",
           "Done: I reviewed the material and finished the requested work.",
           "All requested steps are finished; nothing else is needed.")

Renderer = Callable[[str | None, dict[str, Any] | None, str | None, np.random.Generator],
                    tuple[str, str]]


def _pick(rng: np.random.Generator, options: tuple[Any, ...] | list[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _need(tool: str | None, args: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    if tool is None:
        raise ValueError("tool formats need a tool name")
    return tool, dict(args or {})


def _arg_aliases(tool: str, param: str) -> list[str]:
    """Argument names that the default alias map sends to ``param`` of ``tool``."""
    per = DEFAULT_ARGUMENT_ALIASES.get(tool, {})
    glob = DEFAULT_ARGUMENT_ALIASES["*"]
    return ([a for a, t in per.items() if t == param]
            + [a for a, t in glob.items() if t == param and a not in per])


def example_args(tool: str, n_list: int = 2) -> dict[str, Any]:
    """A representative, schema-valid action of a sandbox tool, with text that stresses
    quoting (apostrophes, double quotes, braces, a newline) in every content argument."""
    out: dict[str, Any] = {}
    for p in TOOLS[tool].params:
        if p.type == "list":
            out[p.name] = [f"user{i}@partner.local" for i in range(n_list)]
        elif p.role == "visibility":
            out[p.name] = "internal"
        elif p.role in ("content", "query"):
            out[p.name] = "Q3 report: it's \"final\" {v2}\nthanks"
        elif p.role == "recipient":
            out[p.name] = "alice@partner.local"
        else:
            out[p.name] = f"{p.name.removesuffix('_id')}-1"
    return out


def _strict(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    return _dumps({"tool": tool, "arguments": args}), "valid_strict_json"


def _fenced(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    lead = _pick(rng, _LEADS).format(tool=tool)
    return (f"{lead}```json\n{_dumps({'tool': tool, 'arguments': args})}\n```",
            "valid_repaired_json")


def _prefixed(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    prefix = _pick(rng, _PREFIXES).format(tool=tool)
    return f"{prefix} {_dumps({'tool': tool, 'arguments': args})}", "valid_repaired_json"


def _hermes(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    return (f"<tool_call>\n{_dumps({'name': tool, 'arguments': args})}\n</tool_call>",
            "valid_repaired_json")


def _action_alias(tool, args, final_text, rng):
    """Action-type-as-tool alias with flat arguments: {"action": "email", "to": ...}."""
    tool, args = _need(tool, args)
    names = [a for a, t in DEFAULT_TOOL_ALIASES.items() if t == tool] or [tool]
    return _dumps({"action": _pick(rng, names), **args}), "valid_repaired_json"


def _toolbench(tool, args, final_text, rng):
    """ReAct/ToolBench with a Python-literal Action Input and argument-name aliases."""
    tool, args = _need(tool, args)
    out: dict[str, Any] = {}
    for k, v in args.items():
        key = _pick(rng, [k, *_arg_aliases(tool, k)])
        if key != k and isinstance(v, list) and len(v) == 1 and not key.endswith("s"):
            v = v[0]  # a singular alias carries one value ("attendee": "a@b")
        out[key] = v
    thought = _pick(rng, _THOUGHTS).format(tool=tool)
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {out!r}", "valid_repaired_json"


def _mistral(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    return f"[TOOL_CALLS] {_dumps([{'name': tool, 'arguments': args}])}", "valid_repaired_json"


def _llama3(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    obj = {"name": tool, "parameters": args}
    if rng.random() < 0.5:
        obj = {"type": "function", **obj}
    return _dumps(obj), "valid_repaired_json"


def _pythonic(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"[{tool}({kwargs})]", "valid_repaired_json"


def _mistral_v11(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    return f"[TOOL_CALLS]{tool}{_dumps(args)}", "valid_repaired_json"


def _llama4(tool, args, final_text, rng):
    tool, args = _need(tool, args)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"<|python_start|>[{tool}({kwargs})]<|python_end|>", "valid_repaired_json"


def _react_none(tool, args, final_text, rng):
    text = final_text if final_text and final_text.strip() else _pick(rng, _FINALS)
    return f"Thought: {text}\nAction: None", "final_answer"


def _malformed(tool, args, final_text, rng):
    """Action-like text broken beyond repair: truncated, missing comma, bare words."""
    tool, args = _need(tool, args)
    full = _dumps({"tool": tool, "arguments": args})
    variant = int(rng.integers(4))
    if variant == 0:  # truncated inside the arguments (a max_tokens cut)
        start = full.index('"arguments": ') + len('"arguments": ')
        return full[:int(rng.integers(start, len(full) - 1)) + 1], "malformed"
    if variant == 1:  # missing comma between the members
        return full.replace(f'"{tool}", "arguments"', f'"{tool}" "arguments"', 1), "malformed"
    if variant == 2:  # unquoted words everywhere
        inner = ", ".join(f"{k}: {v}" for k, v in args.items())
        return f"{{tool: {tool}, arguments: {{{inner}}}}}", "malformed"
    return f"<tool_call>\n{_dumps({'name': tool, 'arguments': args})[:-2]}\n</tool_call>", \
        "malformed"


def _invalid_tool(tool, args, final_text, rng):
    """A plausible but non-existent tool, in strict or hermes shape."""
    _, args = _need(tool, args)
    fake = _pick(rng, FAKE_TOOLS)
    if rng.random() < 0.5:
        return _dumps({"tool": fake, "arguments": args}), "invalid_tool"
    return f"<tool_call>\n{_dumps({'name': fake, 'arguments': args})}\n</tool_call>", \
        "invalid_tool"


def _final_answer(tool, args, final_text, rng):
    text = final_text if final_text and final_text.strip() else _pick(rng, _FINALS)
    return _dumps({"final_answer": text}), "final_answer"


def _plain_final(tool, args, final_text, rng):
    text = final_text if final_text and final_text.strip() else _pick(rng, _FINALS)
    return text, "final_answer"


RENDERERS: dict[str, Renderer] = {
    "strict_json": _strict, "fenced_json": _fenced, "prefixed_json": _prefixed,
    "hermes": _hermes, "action_alias": _action_alias, "toolbench": _toolbench,
    "mistral": _mistral, "llama3": _llama3, "pythonic": _pythonic,
    "malformed_json": _malformed, "invalid_tool": _invalid_tool,
    "final_answer": _final_answer, "plain_final": _plain_final,
    "mistral_v11": _mistral_v11, "llama4_pythonic": _llama4, "react_none": _react_none,
}


def render(fmt: str, tool: str | None, args: dict[str, Any] | None, final_text: str | None,
           rng: np.random.Generator) -> tuple[str, str]:
    """Render one action in format ``fmt``; returns (completion text, expected parse status)."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format '{fmt}' "
                         f"(known: {', '.join(FORMATS + REAL_MODEL_FORMATS)})") from None
    return renderer(tool, args, final_text, rng)
