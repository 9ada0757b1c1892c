"""Tool resolution and argument validation of call candidates (paper 000 §4.3, §6.2,
Appendix I).

``ParseContext`` holds one parse call's allowed tools, their schemas and the config: it resolves
a written tool name (exactly, normalized, or through the tool aliases) and knows each tool's
parameters. ``finalize`` turns one call candidate (``protocol.Candidate``) into (name,
arguments, verdict): a tool the agent does not have is ``invalid_tool``, recorded and never executed (§4.3); arguments go through the
argument-name aliases and value coercions, then are checked against the sandbox tool's signature
or the tool's JSON schema (``invalid_schema``). The repairs applied here are named as in Table 24.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from containmentbench.parser.aliases import norm_name
from containmentbench.parser.protocol import Candidate, ParserSettings
from containmentbench.parser.syntax import jsonable
from containmentbench.sandbox.tools import TOOLS, validate_args

# Keys that a flat-argument object may carry besides the arguments (``ignored_keys``).
_META_KEYS = frozenset({"id", "type", "thought", "thoughts", "reasoning", "reason",
                        "explanation", "rationale", "comment", "plan", "call_id", "index"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_SANDBOX_PARAMS = {n: ({p.name: ("array" if p.type == "list" else "string") for p in s.params},
                       s.required) for n, s in TOOLS.items()}


class ParseContext:
    """The allowed tool set, their schemas and the config, for one parse call."""

    __slots__ = ("allowed", "config", "enabled", "schemas")

    def __init__(self, tools: Any, config: ParserSettings) -> None:
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
            n = norm_name(raw)
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


# ---------------------------------------------------------------- arguments and verdict

_DROP = object()


def _safe(v: Any) -> Any:
    try:
        return jsonable(v)
    except ValueError:
        return repr(v)[:1000]


def _arg_target(k: str, per: Mapping[str, str] | None, glob: Mapping[str, str] | None,
                types: dict[str, Any] | None) -> str | None:
    for cand in (k, norm_name(k)):
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
               required: tuple[str, ...], ctx: ParseContext, reps: list[str]) -> dict[str, Any]:
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


def finalize(it: Candidate,
             ctx: ParseContext) -> tuple[str, dict[str, Any], str, str | None, list[str]]:
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
