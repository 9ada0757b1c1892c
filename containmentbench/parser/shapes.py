"""Object shapes: read parsed values as call or final-answer candidates (paper 000 §6.2,
Appendix I, Table 24).

A JSON object (or a list of them) is read as a tool call in any of the shapes real models
produce: ``{"tool", "arguments"}``, hermes/Qwen ``{"name", "arguments"}``, Llama-3 ``{"name",
"parameters"}``, OpenAI ``{"function": {...}}`` and ``tool_calls`` messages, ``{"action": ...}``
with aliased argument keys or flat arguments; or as a final answer (``{"final_answer": ...}`` and
its aliases). A pythonic call expression (``[send_email(to="a")]``) is one more shape. Each shape
repair applied is named on the candidate (``protocol.Candidate``); ``resolve.py`` then resolves
the tool and validates the arguments.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping
from typing import Any

from containmentbench.canonical import canonical_json
from containmentbench.parser.aliases import norm_name
from containmentbench.parser.protocol import Candidate
from containmentbench.parser.resolve import ParseContext
from containmentbench.parser.syntax import jsonable, loads_lenient, python_literal

_TOOL_KEYS = ("tool", "action", "tool_name", "action_name", "function", "function_name", "api",
              "api_name", "command", "name")
_ARG_KEYS = ("arguments", "parameters", "action_input", "input", "params", "args", "kwargs",
             "tool_input", "tool_args", "tool_arguments")
_FINAL_KEYS = ("final_answer", "answer", "final_response", "response", "final")
FINAL_NAMES = frozenset({"final_answer", "finish", "final", "answer", "respond",
                          "final_response"})


_KNOWN_KEYS = frozenset(_TOOL_KEYS + _ARG_KEYS + _FINAL_KEYS + ("tool_calls",))


def args_value(value: Any, reps: list[str]) -> Any:
    if value is None:
        reps.append("missing_arguments")
        return {}
    if isinstance(value, str):
        try:
            parsed, syn = loads_lenient(value)
        except ValueError:
            return value  # a bare value; finalize may assign it to the only parameter
        if isinstance(parsed, dict):
            reps.append("arguments_json_string")
            reps.extend(syn)
            return parsed
        return parsed if isinstance(parsed, str) else value
    return value


def final_text(value: Any) -> str:
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


def obj_items(d: dict[str, Any], ctx: ParseContext, native: bool,
              depth: int = 0) -> list[Candidate] | None:
    """Classify one JSON object: call(s), a final answer, or None (no tool name in it)."""
    nk: dict[str, str] = {}
    for k in d:
        nk.setdefault(k if k in _KNOWN_KEYS else norm_name(k), k)
    k = nk.get("tool_calls")
    if k is not None and isinstance(d[k], list) and depth == 0:  # an OpenAI assistant message
        items = [it for e in d[k][:ctx.config.max_calls] if isinstance(e, dict)
                 for it in (obj_items(e, ctx, True, 1) or ())]
        return items or None
    k = nk.get("function")
    if k is not None and isinstance(d[k], Mapping):  # {"function": {"name", "arguments"}}
        fn = d[k]
        if not isinstance(fn.get("name"), str):
            return None
        reps = ["openai_function"]
        args = args_value(fn.get("arguments", fn.get("parameters")), reps)
        if any(x not in (k, "type", "id") for x in d):
            reps.append("ignored_keys")
        return [Candidate("call", name=fn["name"], args=args, repairs=reps)]
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
                return [Candidate("final", text=final_text(d[nk[fk]]), repairs=reps)]
        return None
    tk, ok = chosen
    raw = d[ok]
    if norm_name(raw) in FINAL_NAMES and not (ctx.allowed is not None and raw in ctx.allowed):
        body = d[nk[argk]] if argk else {x: v for x, v in d.items() if x != ok}
        return [Candidate("final", text=final_text(body), repairs=["final_answer_alias"])]
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
        args = args_value(d[aok], reps)
        if any(x not in (ok, aok) and not (x == "type" and d[x] == "function") for x in d):
            reps.append("ignored_keys")
        return [Candidate("call", name=raw, args=args, repairs=reps)]
    args = {x: v for x, v in d.items() if x != ok and not (x == "type" and v == "function")}
    reps.append("flat_arguments" if args else "missing_arguments")
    return [Candidate("call", name=raw, args=args, repairs=reps, flat=True)]


def value_items(v: Any, ctx: ParseContext, native: bool) -> list[Candidate] | None:
    if isinstance(v, dict):
        return obj_items(v, ctx, native)
    if isinstance(v, list):
        items = [it for e in v[:ctx.config.max_calls] if isinstance(e, dict)
                 for it in (obj_items(e, ctx, native) or ())]
        if items and not native:
            for it in items:
                it.repairs.insert(0, "call_list")
        return items or None
    return None


# ---------------------------------------------------------------- pythonic calls


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def pythonic_calls(src: str, max_calls: int) -> list[Candidate] | None:
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
            pos = [jsonable(python_literal(a)) for a in c.args]
            args = {kw.arg: jsonable(python_literal(kw.value)) for kw in c.keywords}
        except Exception:
            return None  # a name or expression as value: not a recoverable call
        err = None
        if None in args:
            err = "**kwargs are not accepted"
        elif len(pos) == 1 and not args and isinstance(pos[0], dict):
            args = pos[0]  # send_email({"to": ...}): the object is the arguments
        elif pos:
            err = "positional arguments are not accepted (use keyword arguments)"
        items.append(Candidate("call", name=name, args=args, repairs=["pythonic_call"], error=err))
    return items
