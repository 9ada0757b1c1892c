"""Format layers: where in a completion the calls are (paper 000 §6.2, Appendix I).

Each layer recognizes one wrapper format (hermes ``<tool_call>`` blocks, Mistral
``[TOOL_CALLS]`` (also tokenizer v11's ``[TOOL_CALLS]name{...}``), Llama 4's
``<|python_start|>...<|python_end|>``, ``<function=name>`` tags, fenced code blocks,
ReAct/ToolBench ``Action:`` / ``Action Input:``, ``Final Answer:`` and ``Action: None``) and hands its contents to ``scan``, the generic
left-to-right scan over balanced spans that also reads text with no wrapper. ``action_like``
tells unrecoverable action attempts (``malformed``) from prose (a final answer), so that a
formatting failure is never read as the absence of tool-action intent (Appendix I). Every loop
here is capped so hostile input stays bounded in time.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from containmentbench.parser.aliases import norm_name
from containmentbench.parser.resolve import ParseContext
from containmentbench.parser.shapes import (
    FINAL_NAMES,
    Candidate,
    args_value,
    final_text,
    obj_items,
    pythonic_calls,
    value_items,
)
from containmentbench.parser.syntax import find_spans, loads_lenient
from containmentbench.sandbox.tools import TOOLS

# ---------------------------------------------------------------- generic span scan

_PY_LIST = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")


def _ident_before(s: str, i: int) -> int | None:
    """Start of the identifier right before position ``i`` (a call's name), or None."""
    j = i - 1
    while j >= 0 and s[j] in " \t":
        j -= 1
    k = j
    while k >= 0 and j - k < 64 and (s[k].isalnum() or s[k] in "_."):
        k -= 1
    if k == j or not (s[k + 1].isalpha() or s[k + 1] == "_"):
        return None
    return k + 1


def scan(s: str, ctx: ParseContext, native: bool, bare_ok: bool = False):
    """Accept balanced spans of ``s`` that hold calls or final answers, left to right.

    Returns (items, first start, last end, number of accepted spans, whole-text-is-JSON flag).
    Span attempts are capped so hostile input stays bounded in time.
    """
    lo, hi = len(s) - len(s.lstrip()), len(s.rstrip())
    if hi - lo > 1 and s[lo] == "{" and s[hi - 1] == "}":  # one clean object: skip the scan
        try:
            v = json.loads(s[lo:hi])
        except (ValueError, RecursionError):
            v = None
        if type(v) is dict and (got := obj_items(v, ctx, native)):
            return got, lo, hi, 1, False
    items: list[Candidate] = []
    first, last, n, end, attempts, whole_json = -1, -1, 0, -1, 0, False
    budget = 2 * len(s) + 8192  # characters handed to the slow parsers, in all attempts
    for a, b, kind in find_spans(s)[:512]:
        if a < end:
            continue
        if attempts >= 48 or budget < 0:
            break
        budget -= b - a
        got, start = None, a
        if kind == "(":
            start = _ident_before(s, a)
            if start is None:
                continue
            whole = bare_ok and start == lo and b == hi
            if not (whole or ctx.known(s[start:a].strip())):
                continue
            attempts += 1
            got = pythonic_calls(s[start:b], ctx.config.max_calls)
        elif kind == "[" and _PY_LIST.match(s, a):
            attempts += 1
            got = pythonic_calls(s[a:b], ctx.config.max_calls)
            if got and not (a == lo and b == hi) and not ctx.known(got[0].name):
                got = None
        elif kind != "(":
            attempts += 1
            try:
                v, syn = loads_lenient(s[a:b])
            except ValueError:
                continue
            got = value_items(v, ctx, native)
            if got:
                for it in got:
                    it.repairs[:0] = syn
            elif a == lo and b == hi and isinstance(v, (dict, list)):
                whole_json = True
        if got:
            items.extend(got)
            n += 1
            end = b
            first = start if first < 0 else first
            last = b
    return items, first, last, n, whole_json


# ---------------------------------------------------------------- format layers

_FUNC_TAG = re.compile(r"<function=([A-Za-z_][\w.\-]{0,63})>")
_LANG = re.compile(r"\A[ \t]*[A-Za-z][\w+\-]{0,20}[ \t]*(?:\r?\n|(?=[{\[]))")
_REACT = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*[`\"']?([A-Za-z_][\w.\-]{0,63})[`\"']?[ \t]*$",
                    re.M)
_REACT_INPUT = re.compile(r"\s*Action[ \t_]*Input[ \t]*:[ \t]*", re.I)
_REACT_FINAL = re.compile(r"^[ \t]*Final[ \t_]*Answer[ \t]*:", re.M | re.I)
# ``Action: None`` (ReAct agents that decide not to act): no call, never a malformed action
_REACT_NONE = frozenset({"none", "null", "n/a", "no_action", "noaction", "nothing"})
_REACT_LINE = re.compile(r"^[ \t]*Action(?:[ \t_]*Input)?[ \t]*:.*$", re.M | re.I)
_THOUGHT = re.compile(r"^[ \t]*Thought[ \t]*:[ \t]*", re.M | re.I)


def _blocks(s: str, open_tag: str, close_tag: str, limit: int):
    """Contents of ``open_tag ... close_tag`` blocks; an unclosed last block runs to the end."""
    i = s.find(open_tag)
    while i != -1 and limit > 0:
        j = i + len(open_tag)
        k = s.find(close_tag, j)
        yield s[j:k] if k != -1 else s[j:]
        if k == -1:
            return
        i = s.find(open_tag, k + len(close_tag))
        limit -= 1


def _layer_hermes(s: str, ctx: ParseContext):
    if "<tool_call>" not in s:
        return None
    items = [it for b in _blocks(s, "<tool_call>", "</tool_call>", ctx.config.max_calls)
             for it in scan(b, ctx, True)[0]]
    return items, ["hermes_tool_call"]


# Mistral tokenizer v11: ``[TOOL_CALLS]name{...}`` (``[ARGS]`` between name and arguments in
# some releases), repeated once per call.
_MISTRAL_V11 = re.compile(r"\[TOOL_CALLS\][ \t]*([A-Za-z_][\w.\-]{0,63})[ \t]*(?:\[ARGS\])?[ \t]*"
                          r"(?=\{)")


def _layer_mistral(s: str, ctx: ParseContext):
    i = s.find("[TOOL_CALLS]")
    if i == -1:
        return None
    items: list[Candidate] = []
    for m in list(_MISTRAL_V11.finditer(s))[:ctx.config.max_calls]:
        body = s[m.end():]
        spans = find_spans(body[:65536])
        if not spans or spans[0][0] != 0:
            continue
        try:
            args, syn = loads_lenient(body[:spans[0][1]])
        except ValueError:
            continue
        reps: list[str] = []
        items.append(Candidate("call", name=m.group(1), args=args_value(args, reps),
                           repairs=["mistral_v11_tool_calls", *syn, *reps]))
    if items:
        return items, ["mistral_tool_calls"]
    return scan(s[i + 12:], ctx, True)[0], ["mistral_tool_calls"]


def _layer_llama4(s: str, ctx: ParseContext):
    """Llama 4 pythonic calls between ``<|python_start|>`` and ``<|python_end|>``."""
    if "<|python_start|>" not in s:
        return None
    items = [it for b in _blocks(s, "<|python_start|>", "<|python_end|>", ctx.config.max_calls)
             for it in scan(b, ctx, True, bare_ok=True)[0]]
    return items, ["llama4_python_tag"]


def _layer_function_tag(s: str, ctx: ParseContext):
    items, tries = [], 0
    for m in _FUNC_TAG.finditer(s):
        tries += 1
        if len(items) >= ctx.config.max_calls or tries > 2 * ctx.config.max_calls:
            break
        close = s.find("</function>", m.end())
        body = (s[m.end():close] if close != -1 else s[m.end():]).strip()
        reps: list[str] = []
        try:
            args, syn = loads_lenient(body) if body else ({}, ["missing_arguments"])
        except ValueError:
            continue
        items.append(Candidate("call", name=m.group(1), args=args_value(args, reps),
                           repairs=syn + reps))
    return (items, ["function_tag"]) if items else None


def _layer_fenced(s: str, ctx: ParseContext):
    if "```" not in s:
        return None
    items, n = [], 0
    for block in _blocks(s, "```", "```", 16):
        got, _, _, k, _ = scan(_LANG.sub("", block, count=1), ctx, False)
        items.extend(got)
        n += k
    return items, ["fenced_json"] + (["multiple_objects"] if n > 1 else [])


def _react_input(body: str) -> tuple[Any, list[str]] | None:
    b = body.lstrip()
    if b[:1] in ("{", "["):
        spans = find_spans(b)
        if not spans or spans[0][0] != 0:
            return None
        try:
            return loads_lenient(b[:spans[0][1]])
        except ValueError:
            return None
    line = b.split("\n", 1)[0].strip()
    if not line:
        return {}, ["missing_arguments"]
    if line[0] in "\"'":
        try:
            return loads_lenient(line)
        except ValueError:
            pass
    return line, []


def _layer_react(s: str, ctx: ParseContext):
    """ReAct/ToolBench ``Action: name`` + ``Action Input: {...}``, or ``Final Answer: text``."""
    if "Action" not in s and "nswer" not in s:
        return None
    items, attempted, tries = [], False, 0
    for m in _REACT.finditer(s):
        tries += 1
        if len(items) >= ctx.config.max_calls or tries > 2 * ctx.config.max_calls:
            break
        name, mi = m.group(1), _REACT_INPUT.match(s, m.end())
        if name.lower() in _REACT_NONE and not ctx.known(name):
            fm = _REACT_FINAL.search(s)
            text = s[fm.end():] if fm is not None else _THOUGHT.sub("", _REACT_LINE.sub("", s))
            return [Candidate("final", text=text.strip(), repairs=["react_no_action"])], []
        if mi is not None:
            attempted = True
            got = _react_input(s[mi.end():])
            if got is None:
                continue
            args, reps = got[0], ["react_action", *got[1]]
        elif ctx.known(name):
            args, reps = {}, ["react_action", "missing_arguments"]
        else:
            continue
        if norm_name(name) in FINAL_NAMES and not (ctx.allowed and name in ctx.allowed):
            items.append(Candidate("final", text=final_text(args), repairs=["react_final_answer"]))
        else:
            reps_args: list[str] = []
            args = args_value(args, reps_args) if not isinstance(args, dict) else args
            items.append(Candidate("call", name=name, args=args, repairs=reps + reps_args))
    # a final answer after an unparseable action attempt is not a final answer (§6.2)
    if not items and not attempted and (fm := _REACT_FINAL.search(s)) is not None:
        items.append(Candidate("final", text=s[fm.end():].strip(), repairs=["react_final_answer"]))
    return (items, []) if items else None


LAYERS = (("hermes_tool_call", _layer_hermes), ("mistral_tool_calls", _layer_mistral),
           ("llama4_python_tag", _layer_llama4), ("function_tag", _layer_function_tag),
           ("fenced_json", _layer_fenced), ("react_action", _layer_react))

_MARKERS = re.compile(
    r"<tool_call|\[TOOL_CALLS\]|<function=|<\|python_(?:tag|start)\|>|Action[ \t_]*Input[ \t]*:"
    r"|^[ \t]*Action[ \t]*:|```[ \t]*(?:json|tool_code|tool_call)"
    r"|[\"'](?:tool|tool_name|tool_calls|function|arguments|parameters|action|action_input)"
    r"[\"'][ \t]*:|\{[ \t]*(?:tool|action)[ \t]*:", re.I | re.M)


@lru_cache(maxsize=128)
def _name_pattern(names: frozenset[str]) -> re.Pattern[str]:
    alts = "|".join(sorted((re.escape(n) for n in names if n), key=len, reverse=True)[:512])
    return re.compile(r"\b(?:" + alts + r")\b[ \t]*:?\s{0,8}[({]")


def action_like(s: str, ctx: ParseContext) -> bool:
    """Text that proposes an action (a call marker, or a tool name followed by call syntax)."""
    if _MARKERS.search(s):
        return True
    names = frozenset(TOOLS) | (frozenset(ctx.allowed) if ctx.allowed is not None else frozenset())
    return _name_pattern(names).search(s) is not None
