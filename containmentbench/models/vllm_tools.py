"""vLLM's own tool parsers, run beside ours (issue "one prompt per model": where vLLM ships a
tool parser for the model, its result is recorded next to our parser's and their agreement is
reported).

:func:`make_native_parser` wraps ``vllm.tool_parsers.ToolParserManager`` parsers (``hermes``,
``mistral``, ``llama3_json``, ``pythonic``, ``llama4_pythonic``, ...) as a function of a
completion text that returns canonical JSON: ``[{"name": ..., "arguments": {...}}, ...]`` (an
empty list when the parser found no call) or ``{"error": "..."}`` when it raised.
:func:`calls_of_ours` gives our parser's calls in the same form, :func:`agreement` compares the
two over many completions. Imports vllm only when called.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from containmentbench.canonical import canonical_json


def _request(tools: list[dict[str, Any]]) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(
        model="containmentbench", messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": t} for t in tools] or None,
        tool_choice="auto" if tools else "none")


def make_native_parser(name: str, tokenizer: Any) -> Callable[[str, Any], str]:
    """``fn(text, request) -> canonical JSON`` of vLLM parser ``name`` (KeyError if unknown).

    ``request`` is a :class:`GenerationRequest` (its tools go into the parser's request) or None.
    """
    from vllm.tool_parsers import ToolParserManager

    cls = ToolParserManager.get_tool_parser(name)
    cache: dict[str, Any] = {}

    def run(text: str, request: Any = None) -> str:
        tools = list(getattr(request, "tools", None) or [])
        key = canonical_json(tools)
        if key not in cache:
            cache[key] = _request(tools)
        try:
            parser = cls(tokenizer)  # parsers keep per-response state: a fresh one per text
            info = parser.extract_tool_calls(text, cache[key])
            calls = []
            for call in info.tool_calls if info.tools_called else []:
                args = call.function.arguments
                # unparsable arguments stay text: a disagreement, not a crash
                with contextlib.suppress(ValueError):
                    args = json.loads(args) if isinstance(args, str) else args
                calls.append({"name": call.function.name, "arguments": args})
            return canonical_json(calls)
        except Exception as exc:  # a parser bug is recorded, never ends the rollout
            return canonical_json({"error": f"{type(exc).__name__}: {exc}"[:300]})

    return run


def calls_of_ours(text: str, tools: Iterable[str] | None = None) -> str:
    """Our parser's valid calls of ``text`` in the native parsers' canonical form."""
    from containmentbench.parser import VALID_STATUSES, ParserConfig, parse

    r = parse(text, sorted(tools) if tools is not None else None, ParserConfig(max_calls=8))
    return canonical_json([{"name": c.name, "arguments": c.arguments}
                           for c in r.calls if c.status in VALID_STATUSES])


def agreement(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Share of completions where ours and vLLM's give the same calls (names and arguments)."""
    n = same = 0
    diffs: list[tuple[str, str]] = []
    for ours, theirs in pairs:
        n += 1
        if ours == theirs:
            same += 1
        elif len(diffs) < 5:
            diffs.append((ours, theirs))
    return {"n": n, "agree": same, "share": same / n if n else None, "examples": diffs}
