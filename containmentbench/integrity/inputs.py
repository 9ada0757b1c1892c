"""One reader per input file kind, each ending bad input in one line naming file and field.

* JSON the tool wrote and reads back: :func:`load_json` (``path``, a schema name of
  ``integrity/schemas.py``): not found, not a file, not UTF-8, not JSON (with the line),
  nested too deeply, wrong shape (the dotted field).
* YAML configs: :func:`read_yaml_mapping` (a run's ``config.yaml``, a config option file):
  malformed YAML names its line; anything but a mapping is refused.
* Parquet: trace tables are validated by ``trace/io.read_table`` (schema version in the file
  metadata, every column and type); other tables (metrics, CIM stores) by
  :func:`parquet_schema` and :func:`check_column_kinds` here: the file's footer must be
  readable and each required column must hold the right *kind* of value (a string column
  written by polars may be ``large_string``; an integer ``stage`` is refused all the same).
* Scenario records: ``scenarios/shape.py`` and ``Scenario.from_dict``.

Errors are ``BenchError`` (exit 2): the file is wrong, not the tool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError, ValidationError


def _need_file(path: Path, what: str) -> None:
    if not path.exists():
        raise BenchError(f"{what} not found", file=str(path))
    if not path.is_file():
        raise BenchError(f"{what} is not a regular file", file=str(path))


def _text(path: Path, what: str, follow: bool = True) -> str:
    """The file's text through the one safe open (``integrity/safeopen.py``): no FIFO, no
    device, no socket, size capped, no symbolic link where ``follow`` is false."""
    from containmentbench.integrity import safeopen

    return safeopen.read_text(path, limit=safeopen.LIMIT_JSON, what=what, follow=follow)


def read_json(path: str | Path, what: str = "JSON file", follow: bool = True) -> Any:
    """Parsed JSON of ``path``; every way it can be unreadable is one line naming it."""
    path = Path(path)
    _need_file(path, what)
    try:
        return json.loads(_text(path, what, follow))
    except json.JSONDecodeError as exc:
        raise BenchError(f"not valid JSON ({exc.msg})", file=str(path), line=exc.lineno) \
            from None
    except RecursionError:
        raise BenchError("JSON nested too deeply", file=str(path)) from None


def load_json(path: str | Path, schema: str) -> Any:
    """``path`` read and checked against ``SCHEMAS[schema]`` (``integrity/schemas.py``)."""
    from containmentbench.integrity.schemas import SCHEMAS
    from containmentbench.integrity.shapes import check

    s = SCHEMAS[schema]
    doc = read_json(path, s.what)
    try:
        check(doc, s.spec, strict=s.strict)
        if s.check is not None:
            s.check(doc)
    except ValidationError as exc:
        raise ValidationError(f"{exc.detail} ({s.what})", file=str(path),
                              field=exc.field) from None
    return doc


def read_yaml_mapping(path: str | Path, what: str = "YAML file") -> dict[str, Any]:
    """A YAML file that must hold a mapping (safe loader: no tags, no code)."""
    import yaml

    path = Path(path)
    _need_file(path, what)
    try:
        # libyaml's loader when built (same resolvers as SafeLoader, ~10x faster on the
        # resolved config every rollout job reads)
        data = yaml.load(_text(path, what), Loader=getattr(yaml, "CSafeLoader",
                                                           yaml.SafeLoader))
    except RecursionError:
        raise BenchError("YAML nested too deeply", file=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BenchError(f"not valid YAML ({getattr(exc, 'problem', None) or 'parse error'})",
                         file=str(path), line=mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise BenchError(f"not {what} (expected a mapping, got "
                         f"{type(data).__name__ if data is not None else 'an empty file'})",
                         file=str(path))
    return data


# ------------------------------------------------------------------ Parquet


def parquet_schema(path: str | Path, what: str = "Parquet file") -> Any:
    """The Arrow schema of a Parquet file from its footer (no data read); a missing, truncated
    or non-Parquet file is one line naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from containmentbench.integrity.safeopen import check_regular

    path = Path(path)
    _need_file(path, what)
    check_regular(path, what=what)  # pyarrow would wait on a FIFO
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise BenchError(f"cannot read Parquet ({reason})", file=str(path)) from None


def _kind(t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or \
            getattr(pa.types, "is_string_view", lambda _: False)(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or \
            getattr(pa.types, "is_list_view", lambda _: False)(t):
        return f"list of {_kind(t.value_type)}"
    if pa.types.is_map(t):
        return f"map of {_kind(t.key_type)} to {_kind(t.item_type)}"
    if pa.types.is_struct(t):
        return "struct of " + ", ".join(f"{f.name}: {_kind(f.type)}" for f in t)
    return str(t)


def check_column_kinds(actual: Any, want: Any, path: str | Path, table: str,
                       optional: tuple[str, ...] = ()) -> None:
    """Every column of ``want`` (an Arrow schema) is in ``actual`` with the same kind of value
    (string, integer, float, boolean, timestamp, list of ...); extra columns are allowed.
    A null-typed column (all values missing) fits any kind."""
    import pyarrow as pa

    for f in want:
        i = actual.get_field_index(f.name)
        if i < 0:
            if f.name in optional:
                continue
            raise BenchError(f"missing column '{f.name}' (table '{table}')", file=str(path),
                             field=f.name)
        got = actual.field(i).type
        if pa.types.is_null(got):
            continue
        if _kind(got) != _kind(f.type):
            raise BenchError(f"column '{f.name}' holds {_kind(got)} values ({got}), expected "
                             f"{_kind(f.type)} (table '{table}')", file=str(path),
                             field=f.name)
