"""The input-validation layer (integrity/shapes.py, schemas.py, inputs.py): every way a JSON,
YAML or Parquet input can be wrong is one BenchError naming the file and the field."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.errors import BenchError, ValidationError
from containmentbench.integrity.inputs import (
    check_column_kinds,
    load_json,
    parquet_schema,
    read_json,
    read_yaml_mapping,
)
from containmentbench.integrity.shapes import ANY, B, I, List, Map, N, Opt, S, check

# ------------------------------------------------------------------ shapes

SPEC = {"a": I, "b?": Opt(S), "c": List({"x": N}), "d?": Map(B), "e?": ANY}


@pytest.mark.parametrize("value,field,text", [
    ({"c": []}, "a", "missing"),
    ({"a": True, "c": []}, "a", "expected integer, got boolean"),  # a bool is no integer
    ({"a": 1, "c": [{"x": "1"}]}, "c[0].x", "expected number, got string"),
    ({"a": 1, "c": [{"x": False}]}, "c[0].x", "expected number, got boolean"),
    ({"a": 1, "c": [], "d": {"k": 1}}, "d.k", "expected boolean"),
    ({"a": 1, "c": [], "b": 3}, "b", "expected string or null"),
    ([], None, "expected object, got array"),
])
def test_check_names_the_field(value, field, text):
    with pytest.raises(ValidationError, match=text) as e:
        check(value, SPEC)
    assert e.value.field == field


def test_check_optional_and_free_keys():
    check({"a": 1, "c": [{"x": 2}], "b": None, "zzz": 1}, SPEC)  # extra key: not strict
    check({"a": 1, "c": [{"x": 2.5}], "e": [{"anything": None}]}, SPEC)
    with pytest.raises(ValidationError, match="unknown field") as e:
        check({"a": 1, "c": [], "zzz": 1}, SPEC, strict=True)
    assert e.value.field == "zzz"
    with pytest.raises(ValidationError, match="did you mean 'resamples'") as e:
        check({"c": [{"resample": 2}]}, {"c": List({"resamples": I, "seed": I})},
              strict=True, required=False)
    assert e.value.field == "c[0].resample"
    check({"c": []}, SPEC, required=False)  # scenario records: from_dict names what is missing


# ------------------------------------------------------------------ JSON


@pytest.mark.parametrize("payload,text,line", [
    (b"", "not valid JSON", 1), (b'{\n"a": ', "not valid JSON", 2),
    (b"\xff\xfe{}", "not UTF-8", None), (b"[" * 100_000 + b"]" * 100_000, "nested", None),
])
def test_read_json_errors(payload, text, line, tmp_path):
    p = tmp_path / "x.json"
    p.write_bytes(payload)
    with pytest.raises(BenchError, match=text) as e:
        read_json(p)
    assert e.value.file == str(p) and e.value.line == line


def test_read_json_missing_and_folder(tmp_path):
    with pytest.raises(BenchError, match="not found"):
        read_json(tmp_path / "none.json")
    with pytest.raises(BenchError, match="not a regular file"):
        read_json(tmp_path)


def test_load_json_names_file_field_and_kind(tmp_path):
    p = tmp_path / "SHARD.json"
    p.write_text(json.dumps({"shard": "s", "key": "k", "run_key": 3, "model": "m",
                             "study": "x"}))
    with pytest.raises(ValidationError) as e:
        load_json(p, "shard_record")
    assert e.value.file == str(p) and e.value.field == "run_key"
    assert "SHARD.json" in e.value.render() and "\n" not in e.value.render()


def test_candidates_cross_reference(tmp_path):
    cand = {"sha256": "a" * 64, "strategy": "s", "template": "t"}
    doc = {"settings_sha256": "b" * 64, "condition": "c", "optimized_for": "none",
           "target_preserving": True, "evaluated": [cand], "final": ["a" * 64]}
    p = tmp_path / "candidates.json"
    p.write_text(json.dumps(doc))
    assert load_json(p, "candidates") == doc
    p.write_text(json.dumps({**doc, "final": ["a" * 64, "f" * 64]}))
    with pytest.raises(ValidationError, match="not among the evaluated") as e:
        load_json(p, "candidates")
    assert e.value.field == "final[1]"


# ------------------------------------------------------------------ YAML


@pytest.mark.parametrize("text,match,line", [
    ("a: [1,\n", "not valid YAML", 2), ("", "an empty file", None), ("- 1\n", "got list", None),
    ("a: !!python/object:os.system x\n", "not valid YAML", 1),  # the safe loader: no tags
])
def test_read_yaml_mapping(text, match, line, tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(BenchError, match=match) as e:
        read_yaml_mapping(p)
    assert e.value.file == str(p) and e.value.line == line


# ------------------------------------------------------------------ Parquet

WANT = pa.schema([pa.field("stage", pa.string()), pa.field("seed", pa.int64()),
                  pa.field("rules", pa.list_(pa.string())), pa.field("x", pa.float64())])


def _write(tmp_path, table: pa.Table):
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    return p


def test_parquet_schema_of_a_damaged_file(tmp_path):
    p = _write(tmp_path, pa.table({"stage": ["a"]}))
    p.write_bytes(p.read_bytes()[:-10])
    with pytest.raises(BenchError, match="cannot read Parquet") as e:
        parquet_schema(p)
    assert e.value.file == str(p)


def test_column_kinds_accept_what_polars_writes(tmp_path):
    import polars as pl

    p = tmp_path / "pl.parquet"
    pl.DataFrame({"stage": ["a"], "seed": [1], "rules": [["r"]], "x": [None]},
                 schema={"stage": pl.String, "seed": pl.Int32, "rules": pl.List(pl.String),
                         "x": pl.Null}).write_parquet(p)
    check_column_kinds(parquet_schema(p), WANT, p, "t")  # large types, int32, null column


@pytest.mark.parametrize("table,field,kind", [
    (pa.table({"stage": [1], "seed": [1], "rules": [["r"]], "x": [1.0]}), "stage", "integer"),
    (pa.table({"stage": ["a"], "seed": ["1"], "rules": [["r"]], "x": [1.0]}), "seed", "string"),
    (pa.table({"stage": ["a"], "seed": [1], "rules": [[1]], "x": [1.0]}), "rules",
     "list of integer"),
    (pa.table({"stage": ["a"], "seed": [1], "rules": [["r"]]}), "x", "missing column"),
])
def test_column_kinds_refuse(table, field, kind, tmp_path):
    p = _write(tmp_path, table)
    with pytest.raises(BenchError, match=kind) as e:
        check_column_kinds(parquet_schema(p), WANT, p, "t")
    assert e.value.field == field and e.value.file == str(p)
    if field == "x":
        check_column_kinds(parquet_schema(p), WANT, p, "t", optional=("x",))
