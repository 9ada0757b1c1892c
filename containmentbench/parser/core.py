"""Action parser with diagnostics (paper 000 §4.3, §6.2 and Appendix I, Table 24).

A completion is turned into zero or more tool calls, a final answer, or a failure status. The
parser must not conflate formatting failures with the absence of tool-action intent (Appendix I):
it accepts strict JSON and recovers the deviations real models produce (fenced JSON, prefixed
JSON, hermes ``<tool_call>`` blocks, ReAct/ToolBench ``Action:``/``Action Input:``, Mistral
``[TOOL_CALLS]``, Llama-3 ``{"name", "parameters"}``, OpenAI ``function`` objects, pythonic calls,
action-type-as-tool aliases and argument aliases), naming every repair it applied. Action-like
text that cannot be recovered is ``malformed``, never a final answer, and a call naming a tool
the agent does not have is ``invalid_tool``: recorded, never executed (§4.3).

Layers are tried in order (hermes, mistral, function tag, fenced, ReAct, generic scan); the
first layer that yields an accepted call or final answer decides. Strict JSON takes a fast path.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from containmentbench.canonical import canonical_json, sha256_json
from containmentbench.sandbox.tools import TOOLS, validate_args

PARSER_VERSION = "cb-parser/1.0"

# Table 24 reports counts of exactly these statuses.
STATUSES = ("valid_strict_json", "valid_repaired_json", "final_answer", "invalid_tool",
            "invalid_schema", "malformed", "empty")
VALID_STATUSES = frozenset({"valid_strict_json", "valid_repaired_json"})

WRAPPER_REPAIRS = ("fenced_json", "prefixed_text", "trailing_text", "multiple_objects",
                   "call_list", "hermes_tool_call", "mistral_tool_calls", "function_tag",
                   "react_action", "react_final_answer", "pythonic_call")
SHAPE_REPAIRS = ("name_key", "llama3_json", "openai_function", "action_key", "tool_name_alias",
                 "arguments_key_alias", "flat_arguments", "missing_arguments",
                 "arguments_json_string", "bare_argument_value", "ignored_keys",
                 "final_answer_alias")
ARGUMENT_REPAIRS = ("argument_name_alias", "argument_value_coercion")
SYNTAX_REPAIRS = ("single_quotes", "python_literal", "trailing_commas", "unquoted_keys",
                  "control_characters")
REPAIR_KINDS = WRAPPER_REPAIRS + SHAPE_REPAIRS + ARGUMENT_REPAIRS + SYNTAX_REPAIRS

# Action-type-as-tool aliases (Appendix I): what models write instead of the tool name.
DEFAULT_TOOL_ALIASES: dict[str, str] = {
    "email": "send_email", "send": "send_email", "send_mail": "send_email", "mail": "send_email",
    "send_message": "send_email", "email_send": "send_email",
    "draft": "draft_email", "save_draft": "draft_email", "compose_email": "draft_email",
    "share": "share_document", "share_doc": "share_document", "share_file": "share_document",
    "invite": "send_invite", "send_calendar_invite": "send_invite", "invite_attendee": "send_invite",
    "post": "post_status_note", "post_status": "post_status_note", "post_note": "post_status_note",
    "status_note": "post_status_note",
    "update_crm_record": "update_crm", "crm_update": "update_crm", "update_record": "update_crm",
    "remember": "memory_write", "save_memory": "memory_write", "write_memory": "memory_write",
    "store_memory": "memory_write",
    "recall": "memory_read", "read_memory": "memory_read",
    "list_memory": "memory_list", "list_memories": "memory_list",
    "scrub_memory": "memory_scrub", "delete_memory": "memory_scrub", "forget": "memory_scrub",
    "quarantine": "memory_quarantine", "quarantine_memory": "memory_quarantine",
    "search": "search_documents", "search_docs": "search_documents",
    "find_documents": "search_documents",
    "search_inbox": "search_email", "search_emails": "search_email",
    "read_doc": "read_document", "open_document": "read_document", "get_document": "read_document",
    "read_mail": "read_email", "open_email": "read_email", "get_email": "read_email",
    "lookup": "lookup_contact", "find_contact": "lookup_contact", "get_contact": "lookup_contact",
    "search_contacts": "lookup_contact",
    "crm": "crm_lookup", "lookup_crm": "crm_lookup", "get_crm_record": "crm_lookup",
    "calendar": "list_calendar", "list_events": "list_calendar", "get_calendar": "list_calendar",
    "schedule": "create_event", "create_meeting": "create_event", "schedule_meeting": "create_event",
    "add_event": "create_event",
    "messages": "read_messages", "check_messages": "read_messages",
    "record": "write_task_record", "record_task": "write_task_record",
    "task_record": "write_task_record", "write_record": "write_task_record",
    "undo": "rollback", "revert": "rollback",
    "delegate_task": "delegate", "assign": "delegate",
    "hand_off": "handoff", "transfer": "handoff",
}

# ToolBench-style argument aliases (Appendix I), per tool; "*" applies to every tool whose
# parameters contain the target name.
DEFAULT_ARGUMENT_ALIASES: dict[str, dict[str, str]] = {
    "*": {"document_id": "doc_id", "doc": "doc_id", "document": "doc_id", "contact": "contact_id",
          "event": "event_id", "q": "query", "search": "query", "search_query": "query",
          "keywords": "query", "commit": "commit_id", "memory_key": "key"},
    "send_email": {"recipient": "to", "recipients": "to", "email": "to", "to_address": "to",
                   "message": "body", "content": "body", "text": "body", "email_body": "body",
                   "title": "subject", "subject_line": "subject", "carbon_copy": "cc"},
    "draft_email": {"recipient": "to", "recipients": "to", "email": "to", "message": "body",
                    "content": "body", "text": "body", "title": "subject"},
    "share_document": {"to": "recipient", "user": "recipient", "email": "recipient",
                       "share_with": "recipient", "access": "visibility",
                       "permission": "visibility"},
    "post_status_note": {"message": "text", "note": "text", "content": "text", "body": "text",
                         "status": "text", "channel_name": "channel", "channel_id": "channel"},
    "create_event": {"attendee": "attendees", "participants": "attendees",
                     "invitees": "attendees", "guests": "attendees", "name": "title",
                     "event_title": "title", "day": "date", "event_date": "date"},
    "send_invite": {"to": "recipient", "attendee": "recipient", "invitee": "recipient",
                    "email": "recipient"},
    "update_crm": {"key": "field", "field_name": "field", "new_value": "value", "val": "value"},
    "memory_write": {"name": "key", "content": "value", "text": "value", "data": "value",
                     "memory": "value"},
    "memory_read": {"name": "key"}, "memory_scrub": {"name": "key"},
    "memory_quarantine": {"name": "key"},
    "write_task_record": {"text": "summary", "record": "summary", "content": "summary",
                          "result": "summary", "task_summary": "summary"},
    "lookup_contact": {"query": "name", "contact_name": "name", "person": "name"},
    "read_email": {"id": "email_id", "message_id": "email_id"},
    "read_document": {"id": "doc_id"}, "crm_lookup": {"id": "contact_id"},
    "list_calendar": {"day": "date"}, "rollback": {"id": "commit_id"},
    "delegate": {"agent": "worker", "to": "worker", "subtask": "task", "instruction": "task",
                 "instructions": "task"},
    "handoff": {"agent": "to", "recipient": "to", "next_agent": "to", "message": "note",
                "text": "note", "content": "note"},
}

_TOOL_KEYS = ("tool", "action", "tool_name", "action_name", "function", "function_name", "api",
              "api_name", "command", "name")
_ARG_KEYS = ("arguments", "parameters", "action_input", "input", "params", "args", "kwargs",
             "tool_input", "tool_args", "tool_arguments")
_FINAL_KEYS = ("final_answer", "answer", "final_response", "response", "final")
_FINAL_NAMES = frozenset({"final_answer", "finish", "final", "answer", "respond",
                          "final_response"})
_META_KEYS = frozenset({"id", "type", "thought", "thoughts", "reasoning", "reason",
                        "explanation", "rationale", "comment", "plan", "call_id", "index"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEP = re.compile(r"[\s\-/]+")
_SANDBOX_PARAMS = {n: ({p.name: ("array" if p.type == "list" else "string") for p in s.params},
                       s.required) for n, s in TOOLS.items()}


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


@dataclass(slots=True)
class _Item:
    """An extracted candidate before tool resolution: a call or a final answer."""

    kind: str                      # "call" | "final"
    name: str = ""
    args: Any = None
    repairs: list[str] = field(default_factory=list)
    flat: bool = False
    error: str | None = None
    text: str | None = None


def _norm_name(raw: str) -> str:
    s = raw.strip()[:128].strip("`'\" ")
    if s.endswith("()"):
        s = s[:-2]
    if "." in s:
        s = s.rsplit(".", 1)[1]  # functions.send_email
    return _SEP.sub("_", _CAMEL.sub("_", s).lower()).strip("_")


def _dedupe(reps: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(reps))


def jsonable(value: Any, depth: int = 0) -> Any:
    """Return ``value`` as JSON-compatible data (tuples become lists) or raise ValueError."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite number")
        return value
    if depth > 32:
        raise ValueError("nested too deeply")
    if isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"value of type {type(value).__name__} is not JSON data")


class _Ctx:
    """The allowed tool set, their schemas and the config, for one parse call."""

    __slots__ = ("allowed", "config", "enabled", "schemas")

    def __init__(self, tools: Any, config: ParserConfig) -> None:
        self.config = config
        self.enabled = config.repairs
        self.schemas: Mapping[str, Any] | None = None
        if tools is None:
            self.allowed = None
        elif isinstance(tools, Mapping):
            self.allowed, self.schemas = tools, tools
        elif isinstance(tools, (set, frozenset)):
            self.allowed = tools
        else:
            names, schemas = [], {}
            for t in tools:  # names, or OpenAI/ToolSpec-style schema dicts
                if isinstance(t, str):
                    names.append(t)
                elif isinstance(t, Mapping):
                    fn = t.get("function") if isinstance(t.get("function"), Mapping) else t
                    if isinstance(fn.get("name"), str):
                        schemas[fn["name"]] = fn
                        names.append(fn["name"])
                else:
                    names.append(str(t))
            self.allowed = frozenset(names)
            self.schemas = schemas or None

    def resolve(self, raw: str) -> tuple[str | None, bool]:
        """Map a written tool name to (name, aliased); name None when it is not an identifier."""
        ref = self.allowed if self.allowed is not None else TOOLS
        if raw in ref:
            return raw, False
        n = ""
        if "tool_name_alias" in self.enabled:
            n = _norm_name(raw)
            if n in ref:
                return n, True
            target = self.config.tool_aliases.get(n)
            if target is not None:
                return target, True
        if self.allowed is not None:
            return raw[:128], False
        if _IDENT.fullmatch(raw):
            return raw, False
        if n and _IDENT.fullmatch(n):
            return n, True
        return None, False

    def is_allowed(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed

    def known(self, raw: str) -> bool:
        """Whether ``raw`` names (or aliases) a tool this agent has or a sandbox tool."""
        name, _ = self.resolve(raw)
        return name is not None and (name in TOOLS or (self.allowed is not None
                                                       and name in self.allowed))

    def params(self, name: str) -> tuple[dict[str, Any], tuple[str, ...]] | None:
        """(parameter name -> JSON type, required names), or None when nothing is known."""
        if name in _SANDBOX_PARAMS:
            return _SANDBOX_PARAMS[name]
        schema = _params_schema(self.schemas.get(name)) if self.schemas else None
        if schema is None:
            return None
        props = schema.get("properties") or {}
        types = {k: (v.get("type") if isinstance(v, Mapping) else None) for k, v in props.items()}
        req = tuple(r for r in schema.get("required") or () if isinstance(r, str))
        return types, req

    def validate(self, name: str, args: dict[str, Any]) -> str | None:
        if name in TOOLS:
            return validate_args(name, args)
        schema = _params_schema(self.schemas.get(name)) if self.schemas else None
        return _check_schema(schema, args) if schema is not None else None


def _params_schema(spec: Any) -> Mapping[str, Any] | None:
    """The parameters object of a tool schema given as ToolSpec.schema(), OpenAI or bare form."""
    if spec is None:
        return None
    if hasattr(spec, "schema") and callable(spec.schema):
        spec = spec.schema()
    if not isinstance(spec, Mapping):
        return None
    if isinstance(spec.get("function"), Mapping):
        spec = spec["function"]
    if isinstance(spec.get("parameters"), Mapping):
        return spec["parameters"]
    return spec if "properties" in spec or spec.get("type") == "object" else None


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list,), "object": (dict,), "null": (type(None),)}


def _type_ok(value: Any, typ: Any) -> bool:
    types = typ if isinstance(typ, list) else [typ]
    for t in types:
        py = _JSON_TYPES.get(t) if isinstance(t, str) else None
        if py is None:
            return True  # unknown or absent type: accept
        if isinstance(value, bool) and t in ("integer", "number"):
            continue
        if isinstance(value, py):
            return True
    return False


def _check_schema(schema: Mapping[str, Any], args: dict[str, Any]) -> str | None:
    """Required, property-name and type checks for a non-sandbox tool's JSON schema."""
    props = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in args:
            return f"missing argument '{name}'"
    closed = schema.get("additionalProperties") is not True
    for name, value in args.items():
        prop = props.get(name)
        if prop is None:
            if closed:
                return f"unknown argument '{name}'"
            continue
        if not isinstance(prop, Mapping):
            continue
        if not _type_ok(value, prop.get("type")):
            return f"argument '{name}' must be of type {prop.get('type')}"
        items = prop.get("items")
        if isinstance(value, list) and isinstance(items, Mapping) and not all(
                _type_ok(v, items.get("type")) for v in value):
            return f"argument '{name}' items must be of type {items.get('type')}"
    return None


# ---------------------------------------------------------------- syntax: lenient JSON, spans, calls

_TOK = re.compile(r"""[ \t\r\n]*(?:([{}\[\]:,])|("(?:[^"\\]|\\.)*")|('(?:[^'\\]|\\.)*')"""
                  r"""|(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)|([A-Za-z_$][\w$]*))""", re.S)
_WORDS = {"true": True, "false": False, "null": None}
_PY_WORDS = {"True": True, "False": False, "None": None}


class _TooDeep(ValueError):
    pass


def _literal(src: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes warn at compile time
        return ast.literal_eval(src)


def _string(kind: int, tok: str, used: set[str]) -> str:
    if kind == 3:
        used.add("single_quotes")
        if "\\" not in tok and not any(ord(c) < 32 for c in tok):
            return tok[1:-1]  # no escapes: the text itself (ast is ~10x slower)
        return _literal(tok.replace("\n", "\\n").replace("\r", "\\r"))
    try:
        value = json.loads(tok, strict=False)
    except ValueError:
        used.add("python_literal")  # python-only escapes such as \'
        return _literal(tok.replace("\n", "\\n").replace("\r", "\\r"))
    if any(ord(c) < 32 for c in tok):
        used.add("control_characters")
    return value


def _value(toks: list[tuple[int, str]], i: int, used: set[str], depth: int) -> tuple[Any, int]:
    if depth > 64:
        raise _TooDeep("nested too deeply")
    kind, tok = toks[i]
    if kind in (2, 3):
        return _string(kind, tok, used), i + 1
    if kind == 4:
        return (float(tok) if any(c in tok for c in ".eE") else int(tok)), i + 1
    if kind == 5:
        if tok in _WORDS:
            return _WORDS[tok], i + 1
        if tok in _PY_WORDS:
            used.add("python_literal")
            return _PY_WORDS[tok], i + 1
        raise ValueError(f"bare word {tok!r}")
    close = "}" if tok == "{" else "]" if tok == "[" else None
    if close is None:
        raise ValueError(f"unexpected {tok!r}")
    out: Any = {} if close == "}" else []
    i += 1
    if toks[i] == (1, close):
        return out, i + 1
    while True:
        if close == "}":
            kind, tok = toks[i]
            if kind in (2, 3):
                key = _string(kind, tok, used)
            elif kind == 5:
                key = tok
                used.add("unquoted_keys")
            else:
                raise ValueError("expected a key")
            if toks[i + 1] != (1, ":"):
                raise ValueError("expected ':'")
            out[key], i = _value(toks, i + 2, used, depth + 1)
        else:
            item, i = _value(toks, i, used, depth + 1)
            out.append(item)
        if toks[i] == (1, ","):
            if toks[i + 1] == (1, close):
                used.add("trailing_commas")
                return out, i + 2
            i += 1
        elif toks[i] == (1, close):
            return out, i + 1
        else:
            raise ValueError("expected ',' or a closing bracket")


def loads_lenient(s: str) -> tuple[Any, list[str]]:
    """JSON, else JSON with named syntax repairs, else a Python literal; ValueError otherwise."""
    try:
        return json.loads(s), []
    except (ValueError, RecursionError):
        pass
    used: set[str] = set()
    try:
        toks, pos, depth = [], 0, 0
        while (m := _TOK.match(s, pos)) is not None:
            pos = m.end()
            kind = m.lastindex or 0
            toks.append((kind, m.group(kind)))
            if kind == 1 and toks[-1][1] in "{[":
                depth += 1
                if depth > 64:
                    raise _TooDeep("nested too deeply")  # fail before tokenizing it all
            elif kind == 1 and toks[-1][1] in "}]":
                depth -= 1
        if s[pos:].strip() or not toks:
            raise ValueError("unexpected character")
        value, end = _value(toks, 0, used, 0)
        if end != len(toks):
            raise ValueError("extra data")
        return value, [r for r in SYNTAX_REPAIRS if r in used]
    except _TooDeep:
        raise  # too deep for a Python literal as well
    except (ValueError, IndexError, SyntaxError, RecursionError, MemoryError, TypeError):
        pass
    try:
        return jsonable(_literal(s)), ["python_literal"]
    except Exception as exc:  # ast raises many types on hostile input
        raise ValueError("not JSON or a Python literal") from exc


_SCAN = re.compile(r"[{}\[\]()\"'\\]")
_OPEN = {"{": "}", "[": "]", "(": ")"}


def find_spans(s: str) -> list[tuple[int, int, str]]:
    """Balanced ``{}``/``[]``/``()`` spans (string-aware), sorted by start, longest first.

    One linear pass; quotes count only inside brackets and a single quote opens a string only
    where a value or key may start, so apostrophes in prose do not swallow the text.
    """
    spans: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []
    quote, skip = "", -1
    for m in _SCAN.finditer(s):
        i = m.start()
        if i == skip:
            continue
        c = s[i]
        if quote:
            if c == "\\":
                skip = i + 1
            elif c == quote:
                quote = ""
        elif c in _OPEN:
            stack.append((i, _OPEN[c]))
        elif c in ")]}":
            if stack and stack[-1][1] == c:
                start = stack.pop()[0]
                spans.append((start, i + 1, s[start]))
            else:
                stack.clear()
        elif stack and c == '"':
            quote = '"'
        elif stack and c == "'":
            j = i - 1
            while j >= 0 and s[j] in " \t\r\n":
                j -= 1
            if j < 0 or s[j] in "{[(,:=":
                quote = "'"
    spans.sort(key=lambda t: (t[0], -t[1]))
    return spans


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _pythonic(src: str, max_calls: int) -> list[_Item] | None:
    """``[send_email(to="a", subject="x")]`` or ``send_email(...)``: keyword arguments only."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = ast.parse(src.strip(), mode="eval").body
    except Exception:
        return None
    calls = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    if not calls or not all(isinstance(c, ast.Call) for c in calls):
        return None
    items = []
    for c in calls[:max_calls]:
        name = _dotted(c.func)
        if name is None:
            return None
        try:
            pos = [jsonable(_literal(a)) for a in c.args]
            args = {kw.arg: jsonable(_literal(kw.value)) for kw in c.keywords}
        except Exception:
            return None  # a name or expression as value: not a recoverable call
        err = None
        if None in args:
            err = "**kwargs are not accepted"
        elif len(pos) == 1 and not args and isinstance(pos[0], dict):
            args = pos[0]  # send_email({"to": ...}): the object is the arguments
        elif pos:
            err = "positional arguments are not accepted (use keyword arguments)"
        items.append(_Item("call", name=name, args=args, repairs=["pythonic_call"], error=err))
    return items


# ---------------------------------------------------------------- object shapes -> candidate items

_KNOWN_KEYS = frozenset(_TOOL_KEYS + _ARG_KEYS + _FINAL_KEYS + ("tool_calls",))


def _args_value(value: Any, reps: list[str]) -> Any:
    if value is None:
        reps.append("missing_arguments")
        return {}
    if isinstance(value, str):
        try:
            parsed, syn = loads_lenient(value)
        except ValueError:
            return value  # a bare value; _finalize may assign it to the only parameter
        if isinstance(parsed, dict):
            reps.append("arguments_json_string")
            reps.extend(syn)
            return parsed
        return parsed if isinstance(parsed, str) else value
    return value


def _final_text(value: Any) -> str:
    if isinstance(value, dict):
        for k in ("final_answer", "answer", "response", "text", "return", "message"):
            if isinstance(value.get(k), str):
                return value[k]
    if isinstance(value, str):
        return value
    try:
        return canonical_json(jsonable(value))
    except ValueError:
        return str(value)


def _obj_items(d: dict[str, Any], ctx: _Ctx, native: bool, depth: int = 0) -> list[_Item] | None:
    """Classify one JSON object: call(s), a final answer, or None (no tool name in it)."""
    nk: dict[str, str] = {}
    for k in d:
        nk.setdefault(k if k in _KNOWN_KEYS else _norm_name(k), k)
    k = nk.get("tool_calls")
    if k is not None and isinstance(d[k], list) and depth == 0:  # an OpenAI assistant message
        items = [it for e in d[k][:ctx.config.max_calls] if isinstance(e, dict)
                 for it in (_obj_items(e, ctx, True, 1) or ())]
        return items or None
    k = nk.get("function")
    if k is not None and isinstance(d[k], Mapping):  # {"function": {"name", "arguments"}}
        fn = d[k]
        if not isinstance(fn.get("name"), str):
            return None
        reps = ["openai_function"]
        args = _args_value(fn.get("arguments", fn.get("parameters")), reps)
        if any(x not in (k, "type", "id") for x in d):
            reps.append("ignored_keys")
        return [_Item("call", name=fn["name"], args=args, repairs=reps)]
    argk = next((a for a in _ARG_KEYS if a in nk), None)
    chosen = None
    for tk in _TOOL_KEYS:
        ok = nk.get(tk)
        if ok is None or not isinstance(d[ok], str):
            continue
        known = ctx.known(d[ok])
        if tk == "name" and not (native or argk or d.get("type") == "function" or known):
            continue  # {"name": "Bob", "email": ...} is data, not a call
        if chosen is None or known:
            chosen = (tk, ok)
        if known:
            break
    if chosen is None:
        for fk in _FINAL_KEYS:
            if fk in nk:
                reps = [] if nk[fk] == "final_answer" else ["final_answer_alias"]
                if len(d) > 1:
                    reps.append("ignored_keys")
                return [_Item("final", text=_final_text(d[nk[fk]]), repairs=reps)]
        return None
    tk, ok = chosen
    raw = d[ok]
    if _norm_name(raw) in _FINAL_NAMES and not (ctx.allowed is not None and raw in ctx.allowed):
        body = d[nk[argk]] if argk else {x: v for x, v in d.items() if x != ok}
        return [_Item("final", text=_final_text(body), repairs=["final_answer_alias"])]
    reps = []
    if tk == "name":
        if not native:
            reps.append("llama3_json" if argk == "parameters" else "name_key")
    elif tk != "tool" or ok != "tool":
        reps.append("action_key")
    if argk is not None:
        aok = nk[argk]
        if aok != "arguments" and not (argk == "parameters" and "llama3_json" in reps):
            reps.append("arguments_key_alias")
        args = _args_value(d[aok], reps)
        if any(x not in (ok, aok) and not (x == "type" and d[x] == "function") for x in d):
            reps.append("ignored_keys")
        return [_Item("call", name=raw, args=args, repairs=reps)]
    args = {x: v for x, v in d.items() if x != ok and not (x == "type" and v == "function")}
    reps.append("flat_arguments" if args else "missing_arguments")
    return [_Item("call", name=raw, args=args, repairs=reps, flat=True)]


def _value_items(v: Any, ctx: _Ctx, native: bool) -> list[_Item] | None:
    if isinstance(v, dict):
        return _obj_items(v, ctx, native)
    if isinstance(v, list):
        items = [it for e in v[:ctx.config.max_calls] if isinstance(e, dict)
                 for it in (_obj_items(e, ctx, native) or ())]
        if items and not native:
            for it in items:
                it.repairs.insert(0, "call_list")
        return items or None
    return None


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


def _scan(s: str, ctx: _Ctx, native: bool, bare_ok: bool = False):
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
        if type(v) is dict and (got := _obj_items(v, ctx, native)):
            return got, lo, hi, 1, False
    items: list[_Item] = []
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
            got = _pythonic(s[start:b], ctx.config.max_calls)
        elif kind == "[" and _PY_LIST.match(s, a):
            attempts += 1
            got = _pythonic(s[a:b], ctx.config.max_calls)
            if got and not (a == lo and b == hi) and not ctx.known(got[0].name):
                got = None
        elif kind != "(":
            attempts += 1
            try:
                v, syn = loads_lenient(s[a:b])
            except ValueError:
                continue
            got = _value_items(v, ctx, native)
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


# ---------------------------------------------------------------- resolution and validation

_DROP = object()


def _safe(v: Any) -> Any:
    try:
        return jsonable(v)
    except ValueError:
        return repr(v)[:1000]


def _arg_target(k: str, per: Mapping[str, str] | None, glob: Mapping[str, str] | None,
                types: dict[str, Any] | None) -> str | None:
    for cand in (k, _norm_name(k)):
        if types is not None and cand in types and cand != k:
            return cand  # a key-name variant: "docId", "Doc-ID"
        t = per.get(cand) if per else None
        if t is not None and (types is None or t in types):
            return t
        t = glob.get(cand) if glob else None
        if t is not None and types is not None and t in types:
            return t
    return None


def _coerce(v: Any, typ: Any, required: bool) -> Any:
    if typ == "array" and isinstance(v, str):
        return [v]
    if typ == "string":
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str):
            return v[0]
    if v is None and typ is not None and not required:
        return _DROP  # an explicit null for a known optional parameter means "not given"
    return v


def _norm_args(name: str, args: dict[str, Any], types: dict[str, Any] | None,
               required: tuple[str, ...], ctx: _Ctx, reps: list[str]) -> dict[str, Any]:
    """Argument-name aliases and value coercions (Appendix I, ToolBench-style aliases)."""
    amap = ctx.config.argument_aliases
    per, glob = amap.get(name), amap.get("*")
    if "argument_name_alias" in ctx.enabled and (per or (glob and types)):
        out: dict[str, Any] = {}
        for k, v in args.items():
            key = k
            if types is None or k not in types:
                t = _arg_target(k, per, glob, types)
                if t is not None and t not in args and t not in out:
                    key = t
                    reps.append("argument_name_alias")
            out[key] = v
        args = out
    if types is not None and "argument_value_coercion" in ctx.enabled:
        out = {}
        for k, v in args.items():
            nv = _coerce(v, types.get(k), k in required)
            if nv is not v:
                reps.append("argument_value_coercion")
            if nv is not _DROP:
                out[k] = nv
        args = out
    return args


def _finalize(it: _Item, ctx: _Ctx) -> tuple[str, dict[str, Any], str, str | None, list[str]]:
    """Resolve the tool and normalize and validate the arguments of one call candidate.

    Returns (name, arguments, "valid" | "invalid_tool" | "invalid_schema", error, repairs).
    """
    reps: list[str] = []
    name, aliased = ctx.resolve(it.name)
    if aliased:
        reps.append("tool_name_alias")
    args = it.args
    if name is None or not ctx.is_allowed(name):
        shown = name if name is not None else it.name[:128]
        bad = args if isinstance(args, dict) else {} if args is None else {"input": args}
        return shown, _safe(bad), "invalid_tool", f"unknown tool '{shown}'", reps
    pinfo = ctx.params(name)
    types, required = pinfo if pinfo is not None else (None, ())
    if isinstance(args, str) and types and "bare_argument_value" in ctx.enabled:
        target = (required[0] if len(required) == 1
                  else next(iter(types)) if len(types) == 1 else None)
        if target is not None:
            args = {target: args}
            reps.append("bare_argument_value")
    if not isinstance(args, dict):
        return name, {"input": _safe(args)}, "invalid_schema", "arguments must be an object", reps
    if it.flat and "ignored_keys" in ctx.enabled:
        kept = {k: v for k, v in args.items()
                if k not in _META_KEYS or (types is not None and k in types)}
        if len(kept) != len(args):
            reps.append("ignored_keys")
            args = kept
    args = _norm_args(name, args, types, required, ctx, reps)
    err = it.error or ctx.validate(name, args)
    if err is not None or name not in TOOLS:  # a valid sandbox call holds only strings
        try:
            args = jsonable(args)
        except ValueError as exc:
            return name, _safe(args), "invalid_schema", f"arguments are not JSON data: {exc}", reps
    return name, args, ("invalid_schema" if err else "valid"), err, reps


def _assemble(items: list[_Item], layer_reps: list[str], ctx: _Ctx,
              disabled: list[str]) -> ParseResult | None:
    """Turn accepted candidates into a result; candidates needing a disabled repair drop out."""
    calls, finals = [], []
    for it in items:
        reps = layer_reps + it.repairs
        done = _finalize(it, ctx) if it.kind == "call" else None
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


# ---------------------------------------------------------------- format layers

_FUNC_TAG = re.compile(r"<function=([A-Za-z_][\w.\-]{0,63})>")
_LANG = re.compile(r"\A[ \t]*[A-Za-z][\w+\-]{0,20}[ \t]*(?:\r?\n|(?=[{\[]))")
_REACT = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*[`\"']?([A-Za-z_][\w.\-]{0,63})[`\"']?[ \t]*$",
                    re.M)
_REACT_INPUT = re.compile(r"\s*Action[ \t_]*Input[ \t]*:[ \t]*", re.I)
_REACT_FINAL = re.compile(r"^[ \t]*Final[ \t_]*Answer[ \t]*:", re.M | re.I)


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


def _layer_hermes(s: str, ctx: _Ctx):
    if "<tool_call>" not in s:
        return None
    items = [it for b in _blocks(s, "<tool_call>", "</tool_call>", ctx.config.max_calls)
             for it in _scan(b, ctx, True)[0]]
    return items, ["hermes_tool_call"]


def _layer_mistral(s: str, ctx: _Ctx):
    i = s.find("[TOOL_CALLS]")
    if i == -1:
        return None
    return _scan(s[i + 12:], ctx, True)[0], ["mistral_tool_calls"]


def _layer_function_tag(s: str, ctx: _Ctx):
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
        items.append(_Item("call", name=m.group(1), args=_args_value(args, reps),
                           repairs=syn + reps))
    return (items, ["function_tag"]) if items else None


def _layer_fenced(s: str, ctx: _Ctx):
    if "```" not in s:
        return None
    items, n = [], 0
    for block in _blocks(s, "```", "```", 16):
        got, _, _, k, _ = _scan(_LANG.sub("", block, count=1), ctx, False)
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


def _layer_react(s: str, ctx: _Ctx):
    """ReAct/ToolBench ``Action: name`` + ``Action Input: {...}``, or ``Final Answer: text``."""
    if "Action" not in s and "nswer" not in s:
        return None
    items, attempted, tries = [], False, 0
    for m in _REACT.finditer(s):
        tries += 1
        if len(items) >= ctx.config.max_calls or tries > 2 * ctx.config.max_calls:
            break
        name, mi = m.group(1), _REACT_INPUT.match(s, m.end())
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
        if _norm_name(name) in _FINAL_NAMES and not (ctx.allowed and name in ctx.allowed):
            items.append(_Item("final", text=_final_text(args), repairs=["react_final_answer"]))
        else:
            reps_args: list[str] = []
            args = _args_value(args, reps_args) if not isinstance(args, dict) else args
            items.append(_Item("call", name=name, args=args, repairs=reps + reps_args))
    # a final answer after an unparseable action attempt is not a final answer (§6.2)
    if not items and not attempted and (fm := _REACT_FINAL.search(s)) is not None:
        items.append(_Item("final", text=s[fm.end():].strip(), repairs=["react_final_answer"]))
    return (items, []) if items else None


_LAYERS = (("hermes_tool_call", _layer_hermes), ("mistral_tool_calls", _layer_mistral),
           ("function_tag", _layer_function_tag), ("fenced_json", _layer_fenced),
           ("react_action", _layer_react))

_MARKERS = re.compile(
    r"<tool_call|\[TOOL_CALLS\]|<function=|<\|python_tag\|>|Action[ \t_]*Input[ \t]*:"
    r"|^[ \t]*Action[ \t]*:|```[ \t]*(?:json|tool_code|tool_call)"
    r"|[\"'](?:tool|tool_name|tool_calls|function|arguments|parameters|action|action_input)"
    r"[\"'][ \t]*:|\{[ \t]*(?:tool|action)[ \t]*:", re.I | re.M)


@lru_cache(maxsize=128)
def _name_pattern(names: frozenset[str]) -> re.Pattern[str]:
    alts = "|".join(sorted((re.escape(n) for n in names if n), key=len, reverse=True)[:512])
    return re.compile(r"\b(?:" + alts + r")\b[ \t]*:?\s{0,8}[({]")


def _action_like(s: str, ctx: _Ctx) -> bool:
    """Text that proposes an action (a call marker, or a tool name followed by call syntax)."""
    if _MARKERS.search(s):
        return True
    names = frozenset(TOOLS) | (frozenset(ctx.allowed) if ctx.allowed is not None else frozenset())
    return _name_pattern(names).search(s) is not None


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
    ctx = _Ctx(tools, config)
    disabled: list[str] = []
    if s[0] == "{" and s[-1] == "}":  # fast path: the canonical strict object
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            obj = None
        if type(obj) is dict:
            if len(obj) == 2 and type(obj.get("tool")) is str and type(
                    obj.get("arguments")) is dict:
                items = [_Item("call", name=obj["tool"], args=obj["arguments"])]
            else:
                items = _obj_items(obj, ctx, False) or []
            if items and (res := _assemble(items, [], ctx, disabled)) is not None:
                return res
    for kind, layer in _LAYERS:
        if kind not in ctx.enabled:
            continue
        got = layer(s, ctx)
        if got and got[0] and (res := _assemble(got[0], got[1], ctx, disabled)) is not None:
            return res
    items, first, last, n, whole_json = _scan(s, ctx, False, bare_ok=True)
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
    if _action_like(s, ctx):
        return ParseResult([], "malformed", False, [], None,
                           "action-like text that could not be parsed")
    return ParseResult([], "final_answer", False, [], full, None)
