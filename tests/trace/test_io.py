"""Trace tables: schema validated on write and read, errors name file and column, shards are
written atomically with a checksum sidecar."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.errors import SchemaError
from containmentbench.trace.io import read_table, to_table, verify_shard, write_shard


def _edges(n=3):
    return to_table("edges", {"rollout_id": ["r"] * n, "src": list(range(n)),
                              "dst": list(range(1, n + 1)), "kind": ["k"] * n,
                              "propagates_taint": [True] * n})


def test_round_trip(tmp_path):
    shard = write_shard(tmp_path / "s", {"edges": _edges()})
    t = read_table(shard / "edges.parquet", "edges")
    assert t.num_rows == 3 and verify_shard(shard) == []


def test_missing_column_named(tmp_path):
    p = tmp_path / "edges.parquet"
    t = _edges().drop_columns(["kind"]).replace_schema_metadata(
        {b"schema_version": b"1", b"table": b"edges"})
    pq.write_table(t, p)
    with pytest.raises(SchemaError) as e:
        read_table(p, "edges")
    assert e.value.field == "kind" and str(p) in e.value.render()


def test_wrong_type_named(tmp_path):
    p = tmp_path / "edges.parquet"
    t = _edges()
    t = t.set_column(1, "src", pa.array(["a", "b", "c"]))
    pq.write_table(t.replace_schema_metadata({b"schema_version": b"1", b"table": b"edges"}), p)
    with pytest.raises(SchemaError) as e:
        read_table(p, "edges")
    assert e.value.field == "src"


def test_missing_schema_version(tmp_path):
    p = tmp_path / "edges.parquet"
    pq.write_table(_edges().replace_schema_metadata({}), p)
    with pytest.raises(SchemaError) as e:
        read_table(p, "edges")
    assert e.value.field == "schema_version"


def test_to_table_rejects_bad_columns():
    with pytest.raises(SchemaError) as e:
        to_table("edges", {"rollout_id": ["r"], "src": [0], "dst": [1], "kind": ["k"]})
    assert e.value.field == "propagates_taint"
    with pytest.raises(SchemaError):
        to_table("edges", {"rollout_id": [None], "src": [0], "dst": [1], "kind": ["k"],
                           "propagates_taint": [True]})


def test_corruption_detected(tmp_path):
    shard = write_shard(tmp_path / "s", {"edges": _edges()})
    p = shard / "edges.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    assert verify_shard(shard) == [str(p)]


def test_failed_write_keeps_finished_shard(tmp_path, monkeypatch):
    shard = write_shard(tmp_path / "s", {"edges": _edges()})
    before = (shard / "edges.parquet").read_bytes()
    import containmentbench.trace.io as tio

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(tio, "write_table", boom)
    with pytest.raises(RuntimeError):
        write_shard(tmp_path / "s", {"edges": _edges(5)})
    assert (shard / "edges.parquet").read_bytes() == before and verify_shard(shard) == []
