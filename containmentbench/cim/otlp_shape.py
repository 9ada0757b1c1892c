"""The shapes and types of the OTLP/JSON trace export requests ``cim import`` reads, checked
before anything reaches Arrow (issue 37, item 6).

Thirteen hostile inputs (wrong types, missing fields, huge numbers, nested garbage) ended in
tracebacks from deep inside the conversion. :func:`check_request` walks one request as the
OTLP proto describes it (``ExportTraceServiceRequest``: resourceSpans -> scopeSpans -> spans,
each span's ids, times, attributes and events, every attribute an ``AnyValue`` with one
value), and the attributes CIM reads with the type of their column: a string column takes a
``stringValue``, ``delegation.integrity`` an array of strings, ``cim.trace.synthetic`` a
``boolValue``; times are decimal nanoseconds within 64 bits; ``cim.null`` names nullable CIM
columns, ``cim.labels`` is a JSON list of [key, value] strings. The first problem is one
``BenchError`` whose field is the dotted path (``resourceSpans[0].scopeSpans[0].spans[3].
attributes[2](cim.event.id).value``); the caller adds the file.
"""

from __future__ import annotations

import json
import re
from typing import Any

from containmentbench.errors import BenchError

MAX_NANOS = (1 << 63) - 1
_HEX = re.compile(r"[0-9a-fA-F]*")
_ANY = ("stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue",
        "bytesValue")


def _bad(path: str, why: str) -> BenchError:
    return BenchError(why, field=path)


def _list(d: dict[str, Any], key: str, path: str, required: bool = True) -> list[Any]:
    if key not in d:
        if required:
            raise _bad(f"{path}.{key}" if path else key, "missing (a list is required)")
        return []
    v = d[key]
    if not isinstance(v, list):
        raise _bad(f"{path}.{key}" if path else key, f"expected a list, got {_kind(v)}")
    return v


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def nanos(v: Any, path: str) -> int:
    """A 64-bit time in nanoseconds: decimal digits (OTLP/JSON) or a JSON integer."""
    if isinstance(v, str) and v.isdigit() and v.isascii():
        n = int(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        n = v
    else:
        raise _bad(path, f"expected decimal nanoseconds, got {_kind(v)}")
    if not 0 <= n <= MAX_NANOS:
        raise _bad(path, "nanoseconds beyond 64 bits")
    return n


def _hexid(v: Any, n: int, path: str) -> None:
    if not isinstance(v, str) or len(v) != n or not _HEX.fullmatch(v):
        raise _bad(path, f"expected {n} hex digits, got {_kind(v)}")


def any_value(v: Any, path: str, depth: int = 0) -> None:
    """An OTLP ``AnyValue``: an object with exactly one value of its declared type."""
    if not isinstance(v, dict):
        raise _bad(path, f"expected an AnyValue object, got {_kind(v)}")
    keys = [k for k in v if k in _ANY]
    if len(keys) != 1 or len(v) != 1:
        raise _bad(path, "an AnyValue holds exactly one of " + ", ".join(_ANY))
    k, x = keys[0], v[keys[0]]
    ok = {"stringValue": isinstance(x, str), "boolValue": isinstance(x, bool),
          "doubleValue": isinstance(x, (int, float)) and not isinstance(x, bool),
          "bytesValue": isinstance(x, str),
          "intValue": (isinstance(x, int) and not isinstance(x, bool))
          or (isinstance(x, str) and x.lstrip("-").isdigit())}
    if k in ok:
        if not ok[k]:
            raise _bad(f"{path}.{k}", f"wrong type ({_kind(x)})")
        return
    if depth > 8:
        raise _bad(path, "values nested too deeply")
    if not isinstance(x, dict):
        raise _bad(f"{path}.{k}", f"expected an object, got {_kind(x)}")
    items = _list(x, "values", f"{path}.{k}", required=False)
    for i, item in enumerate(items):
        if k == "arrayValue":
            any_value(item, f"{path}.{k}.values[{i}]", depth + 1)
        else:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                raise _bad(f"{path}.{k}.values[{i}]", "expected an object with a string key")
            any_value(item.get("value"), f"{path}.{k}.values[{i}].value", depth + 1)


def _attributes(d: dict[str, Any], path: str, types: dict[str, str]) -> dict[str, Any]:
    """Every attribute of ``d`` checked; returns key -> the AnyValue's value."""
    out: dict[str, Any] = {}
    for i, a in enumerate(_list(d, "attributes", path, required=False)):
        at = f"{path}.attributes[{i}]"
        if not isinstance(a, dict) or not isinstance(a.get("key"), str):
            raise _bad(at, "expected an attribute object with a string key")
        at = f"{at}({a['key']})"
        any_value(a.get("value"), f"{at}.value")
        value = next(iter(a["value"].values()))
        want = types.get(a["key"])
        if a["key"].startswith("cim.labels.") and want is None:
            want = "string"
        if want is not None:
            _typed(value, next(iter(a["value"])), want, f"{at}.value")
        out[a["key"]] = value
    return out


def _typed(value: Any, kind: str, want: str, path: str) -> None:
    if want == "string" and kind != "stringValue":
        raise _bad(path, f"expected a stringValue, got {kind}")
    if want == "bool" and kind != "boolValue":
        raise _bad(path, f"expected a boolValue, got {kind}")
    if want in ("strings", "columns") and (kind != "arrayValue" or not all(
            isinstance(x, dict) and isinstance(x.get("stringValue"), str)
            for x in value.get("values", []))):
        raise _bad(path, "expected an arrayValue of stringValues")
    if want == "nanos":
        if kind != "stringValue":
            raise _bad(path, f"expected decimal nanoseconds as a stringValue, got {kind}")
        nanos(value, path)
    if want == "labels":
        if kind != "stringValue":
            raise _bad(path, f"expected a stringValue holding JSON, got {kind}")
        try:
            doc = json.loads(value)
        except (ValueError, RecursionError):
            raise _bad(path, "not JSON") from None
        if not isinstance(doc, list) or not all(
                isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x)
                for x in doc):
            raise _bad(path, "expected a JSON list of [key, value] strings")


def check_request(doc: Any, span_types: dict[str, str], event_types: dict[str, str],
                  nullable: set[str]) -> None:
    """One trace export request, checked (see the module text). ``span_types`` and
    ``event_types``: attribute key -> ``string``, ``strings``, ``bool``, ``nanos``,
    ``labels`` or ``columns`` (names of ``nullable`` columns)."""
    if not isinstance(doc, dict):
        raise _bad("resourceSpans", f"expected a request object with resourceSpans, got "
                                    f"{_kind(doc)}")
    for ri, rs in enumerate(_list(doc, "resourceSpans", "")):
        w = f"resourceSpans[{ri}]"
        if not isinstance(rs, dict):
            raise _bad(w, f"expected an object, got {_kind(rs)}")
        if "resource" in rs:
            if not isinstance(rs["resource"], dict):
                raise _bad(f"{w}.resource", "expected an object")
            _attributes(rs["resource"], f"{w}.resource", {})
        for si, ss in enumerate(_list(rs, "scopeSpans", w)):
            ws = f"{w}.scopeSpans[{si}]"
            if not isinstance(ss, dict):
                raise _bad(ws, f"expected an object, got {_kind(ss)}")
            for pi, sp in enumerate(_list(ss, "spans", ws)):
                _span(sp, f"{ws}.spans[{pi}]", span_types, event_types, nullable)


def _span(sp: Any, w: str, span_types: dict[str, str], event_types: dict[str, str],
          nullable: set[str]) -> None:
    if not isinstance(sp, dict):
        raise _bad(w, f"expected a span object, got {_kind(sp)}")
    for key, n in (("traceId", 32), ("spanId", 16)):
        if key not in sp:
            raise _bad(f"{w}.{key}", "missing")
        _hexid(sp[key], n, f"{w}.{key}")
    if "parentSpanId" in sp:
        _hexid(sp["parentSpanId"], 16, f"{w}.parentSpanId")
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        if key not in sp:
            raise _bad(f"{w}.{key}", "missing")
        nanos(sp[key], f"{w}.{key}")
    if "name" in sp and not isinstance(sp["name"], str):
        raise _bad(f"{w}.name", "expected a string")
    _attributes(sp, w, span_types)
    if "attributes" not in sp:
        raise _bad(f"{w}.attributes", "missing")
    _list(sp, "links", w, required=False)
    for ei, ev in enumerate(_list(sp, "events", w, required=False)):
        we = f"{w}.events[{ei}]"
        if not isinstance(ev, dict):
            raise _bad(we, f"expected an event object, got {_kind(ev)}")
        if "name" in ev and not isinstance(ev["name"], str):
            raise _bad(f"{we}.name", "expected a string")
        if "timeUnixNano" not in ev:
            raise _bad(f"{we}.timeUnixNano", "missing")
        nanos(ev["timeUnixNano"], f"{we}.timeUnixNano")
        attrs = _attributes(ev, we, event_types if ev.get("name") == "cim.row" else {})
        for col in (attrs.get("cim.null") or {}).get("values", []) \
                if ev.get("name") == "cim.row" else []:
            if col.get("stringValue") not in nullable:
                raise _bad(f"{we}.attributes(cim.null)", f"names {col.get('stringValue')!r}, "
                                                         f"not a nullable CIM column")
