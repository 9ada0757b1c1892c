"""Trace readers refuse a shard whose event numbering or edge direction is broken, with a
one-line error naming the file, the rollout and the field, and exit status 2."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from containmentbench.canonical import sha256_file
from containmentbench.errors import SchemaError
from containmentbench.trace.io import read_table, table_bytes
from containmentbench.trace.validate import check_edges, check_events, check_shard
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    d = tmp_path_factory.mktemp("v") / "shard"
    assert run_cli("rollout", "--suite", "smoke", "--stage", "security", "--defense", "none",
                   "--seed", 1, "--out", d, "--quiet") == 0
    return d


def _tables(shard):
    return (read_table(shard / "events.parquet", "events"),
            read_table(shard / "edges.parquet", "edges"))


def test_sim_shard_is_valid(shard):
    ev, ed = _tables(shard)
    check_shard(ev, ed, "events", "edges")


def _set(table, name, idx, value):
    col = table.column(name).to_pylist()
    col[idx] = value
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(col, table.schema.field(i).type))


def test_gap_duplicate_and_order(shard):
    ev, _ = _tables(shard)
    with pytest.raises(SchemaError, match=r"seq .*0\.\.n-1"):
        check_events(_set(ev, "seq", 3, 99), "ev.parquet")       # a gap
    with pytest.raises(SchemaError, match="field 'seq'"):
        check_events(_set(ev, "seq", 3, 2), "ev.parquet")        # a duplicate
    swapped = ev.take(pa.array([0, 1, 3, 2, *range(4, ev.num_rows)]))
    with pytest.raises(SchemaError, match=r"ev\.parquet"):
        check_events(swapped, "ev.parquet")                       # out of order


def test_interleaved_rollouts_refused(shard):
    ev, _ = _tables(shard)
    rid = ev.column("rollout_id").to_pylist()
    first, second = rid[0], next(r for r in rid if r != rid[0])
    a = ev.filter(pc.equal(ev.column("rollout_id"), first))
    b = ev.filter(pc.equal(ev.column("rollout_id"), second))
    mixed = pa.concat_tables([a.slice(0, 2), b, a.slice(2)])
    with pytest.raises(SchemaError, match="not contiguous"):
        check_events(mixed, "ev.parquet")


def test_backward_and_dangling_edges(shard):
    ev, ed = _tables(shard)
    counts = check_events(ev, "ev")
    src, dst = ed.column("src")[0].as_py(), ed.column("dst")[0].as_py()
    back = _set(_set(ed, "src", 0, dst), "dst", 0, src)
    with pytest.raises(SchemaError, match="points backward"):
        check_edges(back, counts, "ed.parquet")
    with pytest.raises(SchemaError, match="outside"):
        check_edges(_set(ed, "dst", 0, 10**6), counts, "ed.parquet")


def test_metrics_cli_one_line_error(shard, tmp_path, capsys):
    bad = tmp_path / "traces" / "shard"
    bad.mkdir(parents=True)
    for f in shard.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    _, ed = _tables(shard)
    src, dst = ed.column("src")[5].as_py(), ed.column("dst")[5].as_py()
    (bad / "edges.parquet").write_bytes(
        table_bytes("edges", _set(_set(ed, "src", 5, dst), "dst", 5, src)))
    # a shard written that way by a faulty writer: its checksums match, its content is wrong
    sums = bad / "SHA256SUMS"
    sums.write_text("".join(
        f"{sha256_file(bad / 'edges.parquet')}  edges.parquet\n" if ln.endswith("edges.parquet")
        else ln + "\n" for ln in sums.read_text().splitlines()))
    capsys.readouterr()
    assert run_cli("metrics", tmp_path / "traces", "--out", tmp_path / "m.parquet",
                   "--workers", 1) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and "edges.parquet" in err[0] and "backward" in err[0]
    assert not (tmp_path / "m.parquet").exists()
