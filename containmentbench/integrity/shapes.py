"""A small language for the JSON shape of an input, and one checker that names the field.

Every structured input the tool reads back (scenario records, ``analysis.json``,
``candidates.json``, ``summary.json``, ``SHARD.json``, manifests, the ``analysis`` config
section) is checked against a spec before any value is used, so a wrong type, a missing key or
an unknown key is one line naming the dotted field (``evaluated[2].sha256``) instead of a
``KeyError`` or ``TypeError`` deep in the verb (issue 22: "parsers that trust their input").

Spec language: ``S``/``I``/``N``/``B`` (string, integer, number, boolean: a bool is neither an
integer nor a number here), ``ANY``, ``Opt(T)`` (T or null), ``List(T)``, ``Map(T)`` (an
object with free keys, values T), ``Union(A, B)``, and a dict (an object with these keys; a
key written ``"name?"`` may be absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from containmentbench.errors import ValidationError

# one letter per JSON type keeps the specs of long records readable
S, I, N, B, ANY = "string", "integer", "number", "boolean", "any"  # noqa: E741


@dataclass(frozen=True)
class Opt:
    of: Any


@dataclass(frozen=True)
class List:
    of: Any


@dataclass(frozen=True)
class Map:
    of: Any


@dataclass(frozen=True)
class Union:
    a: Any
    b: Any


STRS = List(S)

_JSON = {dict: "object", list: "array", str: S, int: I, float: N, bool: B, type(None): "null"}


def json_type(value: Any) -> str:
    return _JSON.get(type(value), type(value).__name__)


def _name(spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Opt):
        return f"{_name(spec.of)} or null"
    if isinstance(spec, List):
        return f"array of {_name(spec.of)}"
    if isinstance(spec, Union):
        return f"{_name(spec.a)} or {_name(spec.b)}"
    return "object"


def _ok(value: Any, spec: Any) -> bool:
    """Shallow type test (children are checked by the walk)."""
    if spec == ANY:
        return True
    if spec == N:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(spec, str):
        return _JSON.get(type(value)) == spec
    if isinstance(spec, Opt):
        return value is None or _ok(value, spec.of)
    if isinstance(spec, Union):
        return _ok(value, spec.a) or _ok(value, spec.b)
    if isinstance(spec, List):
        return isinstance(value, list)
    return isinstance(value, dict)  # Map or fixed object


def unknown_hint(key: str, known: Any) -> str:
    """`` (did you mean 'resamples'?)`` for a near miss, else the known names when few."""
    import difflib

    names = sorted(known)
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f" (known: {', '.join(names)})" if len(names) <= 10 else ""


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


class _Walk:
    def __init__(self, strict: bool, required: bool, root: str | None) -> None:
        self.strict, self.required, self.root = strict, required, root

    def fail(self, detail: str, where: str) -> None:
        raise ValidationError(detail, field=where or self.root)

    def walk(self, value: Any, spec: Any, where: str) -> None:
        if not _ok(value, spec):
            self.fail(f"expected {_name(spec)}, got {json_type(value)}", where)
        if isinstance(spec, Opt):
            if value is not None:
                self.walk(value, spec.of, where)
        elif isinstance(spec, Union):
            self.walk(value, spec.a if _ok(value, spec.a) else spec.b, where)
        elif isinstance(spec, List):
            for i, v in enumerate(value):
                self.walk(v, spec.of, f"{where}[{i}]")
        elif isinstance(spec, Map):
            for k, v in value.items():
                self.walk(v, spec.of, _join(where, k))
        elif isinstance(spec, dict):
            self.fields(value, spec, where)

    def fields(self, value: dict[str, Any], spec: dict[str, Any], where: str) -> None:
        known = {k.rstrip("?"): (sub, k.endswith("?")) for k, sub in spec.items()}
        if self.strict:
            for k in value:
                if k not in known:
                    self.fail(f"unknown field{unknown_hint(str(k), known)}",
                              _join(where, str(k)))
        for k, (sub, optional) in known.items():
            if k in value:
                self.walk(value[k], sub, _join(where, k))
            elif self.required and not optional:
                self.fail("missing", _join(where, k))


def check(value: Any, spec: Any, *, strict: bool = False, required: bool = True,
          root: str | None = None, where: str = "") -> None:
    """Raise a ValidationError naming the first field that does not fit ``spec``.

    ``strict``: unknown keys of fixed objects are refused (records whose every key has a
    meaning); ``required``: keys not marked ``?`` must be present (off for scenario records,
    whose missing fields ``Scenario.from_dict`` names itself); ``root``: the field named when
    the value itself has the wrong type."""
    _Walk(strict, required, root).walk(value, spec, where)
