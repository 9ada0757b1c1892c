"""Syntax layer of the action parser: lenient JSON, Python literals, balanced spans
(paper 000 §6.2, Appendix I).

``loads_lenient`` reads strict JSON, else JSON with the named syntax repairs of Table 24 (single
quotes, Python-only literals and escapes, trailing commas, unquoted keys, raw control characters),
else a Python literal; ``find_spans`` finds the balanced bracket spans of a completion in one
string-aware pass; ``jsonable`` checks that a value is JSON data. Nothing here knows about tools,
call shapes or the parser config: it turns text into values and says which repairs it needed.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from typing import Any

# The syntax repairs ``loads_lenient`` can name, in the order it reports them (Table 24).
SYNTAX_REPAIRS = ("single_quotes", "python_literal", "trailing_commas", "unquoted_keys",
                  "control_characters")


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


_TOK = re.compile(r"""[ \t\r\n]*(?:([{}\[\]:,])|("(?:[^"\\]|\\.)*")|('(?:[^'\\]|\\.)*')"""
                  r"""|(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)|([A-Za-z_$][\w$]*))""", re.S)
_WORDS = {"true": True, "false": False, "null": None}
_PY_WORDS = {"True": True, "False": False, "None": None}


class _TooDeep(ValueError):
    pass


def python_literal(src: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes warn at compile time
        return ast.literal_eval(src)


def _string(kind: int, tok: str, used: set[str]) -> str:
    if kind == 3:
        used.add("single_quotes")
        if "\\" not in tok and not any(ord(c) < 32 for c in tok):
            return tok[1:-1]  # no escapes: the text itself (ast is ~10x slower)
        return python_literal(tok.replace("\n", "\\n").replace("\r", "\\r"))
    try:
        value = json.loads(tok, strict=False)
    except ValueError:
        used.add("python_literal")  # python-only escapes such as \'
        return python_literal(tok.replace("\n", "\\n").replace("\r", "\\r"))
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
        return jsonable(python_literal(s)), ["python_literal"]
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
