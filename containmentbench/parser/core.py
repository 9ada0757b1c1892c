"""Action parser with diagnostics (paper 000 §4.3, §6.2 and Appendix I, Table 24).

A completion is turned into zero or more tool calls, a final answer, or a failure status. The
parser must not conflate formatting failures with the absence of tool-action intent (Appendix I):
it accepts strict JSON and recovers the deviations real models produce (fenced JSON, prefixed
JSON, hermes ``<tool_call>`` blocks, ReAct/ToolBench ``Action:``/``Action Input:``, Mistral
``[TOOL_CALLS]``, Llama-3 ``{"name", "parameters"}``, OpenAI ``function`` objects, pythonic calls,
action-type-as-tool aliases and argument aliases), naming every repair it applied. Action-like
text that cannot be recovered is ``malformed``, never a final answer, and a call naming a tool
the agent does not have is ``invalid_tool``: recorded, never executed (§4.3).

Layers are tried in order (hermes, mistral, llama 4 python tags, function tag, fenced, ReAct, generic scan); the
first layer that yields an accepted call or final answer decides. Strict JSON takes a fast path.

This module owns the parser's vocabulary and orchestration: ``PARSER_VERSION``, the statuses and
repair kinds counted in Table 24, ``ParserConfig``, ``ParsedCall``/``ParseResult`` and ``parse``.
The steps live beside it: ``syntax`` (lenient JSON, Python literals, bracket spans), ``aliases``
(the Appendix I alias maps), ``shapes`` (object and pythonic shapes -> call candidates),
``layers`` (format layers, the generic scan, the action-like test), ``resolve`` (tool
resolution, argument aliases and coercion, schema validation) and ``protocol`` (the candidate
the steps hand each other and the config fields they read). The steps import downwards only,
``protocol <- resolve <- shapes <- layers <- core``, and never this module: what they share has
a public name in the module that owns it. Names other modules import from here are re-exported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.parser.aliases import DEFAULT_ARGUMENT_ALIASES, DEFAULT_TOOL_ALIASES
from containmentbench.parser.layers import LAYERS, action_like, scan
from containmentbench.parser.protocol import Candidate
from containmentbench.parser.resolve import ParseContext, finalize
from containmentbench.parser.shapes import obj_items
from containmentbench.parser.syntax import SYNTAX_REPAIRS, find_spans, jsonable, loads_lenient

__all__ = [
    "ARGUMENT_REPAIRS",
    "DEFAULT_ARGUMENT_ALIASES",
    "DEFAULT_CONFIG",
    "DEFAULT_TOOL_ALIASES",
    "PARSER_VERSION",
    "REPAIR_KINDS",
    "SHAPE_REPAIRS",
    "STATUSES",
    "SYNTAX_REPAIRS",
    "VALID_STATUSES",
    "WRAPPER_REPAIRS",
    "ParseResult",
    "ParsedCall",
    "ParserConfig",
    "find_spans",
    "jsonable",
    "loads_lenient",
    "parse",
]

PARSER_VERSION = "cb-parser/1.1"  # 1.1: Mistral v11, Llama 4 python tags, Action: None

# Table 24 reports counts of exactly these statuses.
STATUSES = ("valid_strict_json", "valid_repaired_json", "final_answer", "invalid_tool",
            "invalid_schema", "malformed", "empty")
VALID_STATUSES = frozenset({"valid_strict_json", "valid_repaired_json"})

WRAPPER_REPAIRS = ("fenced_json", "prefixed_text", "trailing_text", "multiple_objects",
                   "call_list", "hermes_tool_call", "mistral_tool_calls", "function_tag",
                   "react_action", "react_final_answer", "pythonic_call",
                   "mistral_v11_tool_calls", "llama4_python_tag", "react_no_action")
SHAPE_REPAIRS = ("name_key", "llama3_json", "openai_function", "action_key", "tool_name_alias",
                 "arguments_key_alias", "flat_arguments", "missing_arguments",
                 "arguments_json_string", "bare_argument_value", "ignored_keys",
                 "final_answer_alias")
ARGUMENT_REPAIRS = ("argument_name_alias", "argument_value_coercion")
# SYNTAX_REPAIRS, the repairs of the lenient JSON reader, are defined in syntax.py.
REPAIR_KINDS = WRAPPER_REPAIRS + SHAPE_REPAIRS + ARGUMENT_REPAIRS + SYNTAX_REPAIRS


def _frozen_aliases(tool: Mapping[str, str], args: Mapping[str, Mapping[str, str]]):
    return (MappingProxyType(dict(tool)),
            MappingProxyType({k: MappingProxyType(dict(v)) for k, v in args.items()}))


@dataclass(frozen=True)
class ParserConfig:
    """Which repairs the parser may apply and the alias maps it uses (hashed into traces)."""

    repairs: frozenset[str] = frozenset(REPAIR_KINDS)
    tool_aliases: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TOOL_ALIASES))
    argument_aliases: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: {k: dict(v) for k, v in DEFAULT_ARGUMENT_ALIASES.items()})
    max_calls: int = 16
    max_input_chars: int = 65536
    # False reproduces the pre-repair parser, which read unparseable action-like text as a
    # final answer (the "old action-like final answers" of Table 24).
    action_like_is_malformed: bool = True
    _hash: str = field(init=False, repr=False, compare=False, default="")

    def __post_init__(self) -> None:
        reps = frozenset(self.repairs)
        unknown = sorted(reps - set(REPAIR_KINDS))
        if unknown:
            raise ValueError(f"unknown repair kind(s): {', '.join(unknown)}")
        if self.max_calls < 1 or self.max_input_chars < 1:
            raise ValueError("max_calls and max_input_chars must be positive")
        tools, args = _frozen_aliases(self.tool_aliases, self.argument_aliases)
        object.__setattr__(self, "repairs", reps)
        object.__setattr__(self, "tool_aliases", tools)
        object.__setattr__(self, "argument_aliases", args)
        object.__setattr__(self, "_hash", sha256_json(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        return {"parser_version": PARSER_VERSION, "repairs": sorted(self.repairs),
                "tool_aliases": dict(self.tool_aliases),
                "argument_aliases": {k: dict(v) for k, v in self.argument_aliases.items()},
                "max_calls": self.max_calls, "max_input_chars": self.max_input_chars,
                "action_like_is_malformed": self.action_like_is_malformed}

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of the config and parser version."""
        return self._hash

    def __hash__(self) -> int:
        return hash(self._hash)

    def __reduce__(self):  # mapping proxies do not pickle: rebuild from plain values
        return (ParserConfig, (self.repairs, dict(self.tool_aliases),
                               {k: dict(v) for k, v in self.argument_aliases.items()},
                               self.max_calls, self.max_input_chars,
                               self.action_like_is_malformed))

    @classmethod
    def strict(cls) -> ParserConfig:
        """Strict JSON only, no aliases; unrecoverable action-like text is still malformed."""
        return cls(repairs=frozenset(), tool_aliases={}, argument_aliases={})

    @classmethod
    def legacy(cls) -> ParserConfig:
        """Strict JSON, and anything else is a final answer (the old parser of Table 24)."""
        return cls(repairs=frozenset(), tool_aliases={}, argument_aliases={},
                   action_like_is_malformed=False)

    def without(self, *kinds: str) -> ParserConfig:
        return replace(self, repairs=self.repairs - set(kinds))


DEFAULT_CONFIG = ParserConfig()


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call. ``status`` is per call: only a valid status may be executed."""

    name: str
    arguments: dict[str, Any]
    status: str = "valid_strict_json"
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.status in VALID_STATUSES


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Parser output with diagnostics; ``status`` is that of the first call when there are calls."""

    calls: list[ParsedCall]
    status: str
    repaired: bool
    repairs: list[str]
    final_text: str | None = None
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.status in VALID_STATUSES

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"calls": [{"name": c.name, "arguments": c.arguments}
                                         for c in self.calls],
                               "status": self.status, "repaired": self.repaired,
                               "repairs": list(self.repairs)}
        if self.error is not None:
            out["error"] = self.error
        if self.final_text is not None:
            out["final_text"] = self.final_text
        return out


def _dedupe(reps: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(reps))


# ---------------------------------------------------------------- candidates -> result


def _assemble(items: list[Candidate], layer_reps: list[str], ctx: ParseContext,
              disabled: list[str]) -> ParseResult | None:
    """Turn accepted candidates into a result; candidates needing a disabled repair drop out."""
    calls, finals = [], []
    for it in items:
        reps = layer_reps + it.repairs
        done = finalize(it, ctx) if it.kind == "call" else None
        if done is not None:
            reps = reps + done[4]
        bad = [r for r in reps if r not in ctx.enabled]
        if bad:
            disabled.extend(bad)
        elif done is not None:
            calls.append((done, reps))
        else:
            finals.append((it.text or "", reps))
    if calls:
        calls = calls[:ctx.config.max_calls]
        all_reps = _dedupe(r for _, reps in calls for r in reps)
        ok = "valid_repaired_json" if all_reps else "valid_strict_json"
        parsed = [ParsedCall(n, a, ok if st == "valid" else st, e) for (n, a, st, e, _), _ in calls]
        return ParseResult(parsed, parsed[0].status, bool(all_reps), all_reps, None,
                           parsed[0].error)
    if finals:
        text, reps = finals[0]
        reps = _dedupe(reps)
        return ParseResult([], "final_answer", bool(reps), reps, text, None)
    return None


# ---------------------------------------------------------------- entry point


def parse(text: str, tools: Mapping[str, Any] | Iterable[Any] | None = None,
          config: ParserConfig = DEFAULT_CONFIG) -> ParseResult:
    """Parse one completion into tool calls, a final answer, or a failure status; never raises.

    ``tools``: the agent's tools as names, a name -> JSON-schema mapping, or a list of
    OpenAI/ToolSpec schema dicts; None accepts any identifier as a tool name.
    """
    try:
        return _parse(text, tools, config)
    except Exception as exc:  # a parser bug must not end a rollout: record it as malformed
        return ParseResult([], "malformed", False, [], None,
                           f"parser error: {type(exc).__name__}")


def _parse(text: Any, tools: Any, config: ParserConfig) -> ParseResult:
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    full = text.strip()
    if not full:
        return ParseResult([], "empty", False, [], None, None)
    s = full[:config.max_input_chars]
    ctx = ParseContext(tools, config)
    disabled: list[str] = []
    if s[0] == "{" and s[-1] == "}":  # fast path: the canonical strict object
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            obj = None
        if type(obj) is dict:
            if len(obj) == 2 and type(obj.get("tool")) is str and type(
                    obj.get("arguments")) is dict:
                items = [Candidate("call", name=obj["tool"], args=obj["arguments"])]
            else:
                items = obj_items(obj, ctx, False) or []
            if items and (res := _assemble(items, [], ctx, disabled)) is not None:
                return res
    for kind, layer in LAYERS:
        if kind not in ctx.enabled:
            continue
        got = layer(s, ctx)
        if got and got[0] and (res := _assemble(got[0], got[1], ctx, disabled)) is not None:
            return res
    items, first, last, n, whole_json = scan(s, ctx, False, bare_ok=True)
    if items:
        reps = (["prefixed_text"] if s[:first].strip() else []) + (
            ["trailing_text"] if s[last:].strip() else []) + (["multiple_objects"] if n > 1 else [])
        if (res := _assemble(items, reps, ctx, disabled)) is not None:
            return res
    if not config.action_like_is_malformed:
        return ParseResult([], "final_answer", False, [], full, None)
    if disabled:
        kinds = ", ".join(_dedupe(disabled))
        return ParseResult([], "malformed", False, [], None,
                           f"recovering the action needs disabled repair(s): {kinds}")
    if whole_json:
        return ParseResult([], "malformed", False, [], None, "JSON without a tool name")
    if action_like(s, ctx):
        return ParseResult([], "malformed", False, [], None,
                           "action-like text that could not be parsed")
    return ParseResult([], "final_answer", False, [], full, None)
