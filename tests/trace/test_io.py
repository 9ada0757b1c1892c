"""Trace tables: schema validated on write and read, errors name file and column, shards are
written atomically with a checksum sidecar."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.errors import BenchError, SchemaError
from containmentbench.trace.io import read_table, to_table, verify_shard, write_shard
from containmentbench.trace.schema import SCHEMA_VERSION


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
        {b"schema_version": SCHEMA_VERSION.encode(), b"table": b"edges"})
    pq.write_table(t, p)
    with pytest.raises(SchemaError) as e:
        read_table(p, "edges")
    assert e.value.field == "kind" and str(p) in e.value.render()


def test_wrong_type_named(tmp_path):
    p = tmp_path / "edges.parquet"
    t = _edges()
    t = t.set_column(1, "src", pa.array(["a", "b", "c"]))
    pq.write_table(t.replace_schema_metadata({b"schema_version": SCHEMA_VERSION.encode(), b"table": b"edges"}), p)
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
    from containmentbench.integrity import writer

    real = writer.BuildDir.put

    def boom(self, rel, data):
        real(self, rel, data[: len(data) // 2])  # half a file, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer.BuildDir, "put", boom)
    with pytest.raises(OSError):
        write_shard(tmp_path / "s", {"edges": _edges(5)}, force=True)
    assert (shard / "edges.parquet").read_bytes() == before and verify_shard(shard) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no temporary left


# ------------------------------------------------------------------ never delete (issue 11)


def test_rewrite_identical_keeps_old_different_needs_force(tmp_path):
    shard = write_shard(tmp_path / "s", {"edges": _edges()})
    mtime = (shard / "edges.parquet").stat().st_mtime_ns
    write_shard(tmp_path / "s", {"edges": _edges()})  # identical: kept as it was
    assert (shard / "edges.parquet").stat().st_mtime_ns == mtime
    with pytest.raises(BenchError, match="--force"):
        write_shard(tmp_path / "s", {"edges": _edges(5)})
    assert verify_shard(shard) == [] and (shard / "edges.parquet").stat().st_mtime_ns == mtime
    write_shard(tmp_path / "s", {"edges": _edges(5)}, force=True)
    aside = tmp_path / ".s.replaced-0"
    assert verify_shard(aside) == [] and verify_shard(shard) == []  # old kept, new in place
    assert [p.name for p in tmp_path.glob(".s.cbtmp-*")] == []


def test_foreign_folder_is_refused(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    (study / "MANIFEST.json").write_text("{}")
    for force in (False, True):
        with pytest.raises(BenchError, match="not a shard output"):
            write_shard(study, {"edges": _edges()}, force=force)
    assert [p.name for p in study.iterdir()] == ["MANIFEST.json"]


def test_crash_leftovers_are_cleaned_on_the_next_run(tmp_path, monkeypatch):
    from containmentbench.integrity import writer

    old = write_shard(tmp_path / "a", {"edges": _edges()})
    # a killed writer's half-written folder, and a complete one (the old shard after a swap):
    # both carry our name tag and our record
    half, full = writer.tmp_path(tmp_path / "s"), writer.tmp_path(tmp_path / "s")
    half.mkdir()
    (half / writer.RECORD).write_text("shard\n")
    (half / "edges.parquet").write_bytes(b"half")
    shutil.copytree(old, full)
    # what is not ours stays, whatever its name looks like
    for name in (".s.tmp-99999", ".s.old-backup", ".s.cbtmp-000000000000-00000000"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_text("mine")
    write_shard(tmp_path / "s", {"edges": _edges()})
    assert not half.exists()                                     # incomplete: ours, removed
    assert verify_shard(tmp_path / ".s.replaced-0") == []        # complete: kept aside
    for name in (".s.tmp-99999", ".s.old-backup", ".s.cbtmp-000000000000-00000000"):
        assert (tmp_path / name / "notes.txt").read_text() == "mine"
    # without an atomic exchange the two renames still never lose the old shard
    monkeypatch.setattr("containmentbench.integrity.folders._exchange", lambda a, b: False)
    write_shard(tmp_path / "s", {"edges": _edges(5)}, force=True)
    assert verify_shard(tmp_path / ".s.replaced-1") == [] and verify_shard(tmp_path / "s") == []


def test_a_refused_write_touches_no_leftover(tmp_path):
    """A refusal happens before any cleanup: even our own leftovers stay."""
    study = tmp_path / "s"
    study.mkdir()
    (study / "notes.txt").write_text("mine")
    from containmentbench.integrity import writer

    left = writer.tmp_path(study)
    left.mkdir()
    (left / writer.RECORD).write_text("shard\n")
    with pytest.raises(BenchError, match="not a shard output"):
        write_shard(study, {"edges": _edges()})
    assert left.exists() and (study / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("text", ["", "\n", "abc\n", "0" * 64 + "\n", "0" * 64 + "  ../x\n",
                                  b"\xff\xfe".decode("latin-1")])
def test_empty_or_malformed_checksums_are_never_done(tmp_path, text):
    shard = write_shard(tmp_path / "s", {"edges": _edges()})
    (shard / "SHA256SUMS").write_text(text)
    assert verify_shard(shard) == [str(shard / "SHA256SUMS")]
