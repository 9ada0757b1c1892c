"""A trace without the runtime's provenance labels, fed to ``containmentbench audit run``: one
line naming the rollout (or the file), exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.canonical import sha256_file
from containmentbench.cli.main import main


@pytest.fixture
def shard(tmp_path: Path) -> Path:
    out = tmp_path / "traces" / "m" / "none" / "seed=1" / "security" / "shard-000"
    assert main(["rollout", "--suite", "smoke", "--stage", "security", "--defense", "none",
                 "--seed", "1", "--study", "t", "--out", str(out), "--quiet"]) == 0
    return out


def _rewrite(shard: Path, table: pa.Table, meta) -> None:
    """The events file replaced and its checksum updated: a shard written that way, not a
    damaged one (the shard check would name that first)."""
    pq.write_table(table.replace_schema_metadata(meta), shard / "events.parquet")
    sums = shard / "SHA256SUMS"
    sums.write_text("".join(f"{sha256_file(shard / ln.split()[1])}  {ln.split()[1]}\n"
                            for ln in sums.read_text().splitlines()))


def _audit(run: Path, capsys) -> list[str]:
    capsys.readouterr()
    assert main(["audit", "run", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert not (run / "audit").exists()   # nothing written
    return err


def test_source_events_without_taint_labels_name_the_rollout(shard: Path, capsys) -> None:
    t = pq.read_table(shard / "events.parquet")
    rows = t.to_pylist()
    first = next(r for r in rows if r["kind"] == "source")
    assert any(lab.startswith("taint:") for lab in first["labels"])  # the runtime labels it
    for r in rows:  # as a runtime without taint tracking records them: no labels at all
        r["labels"] = []
    _rewrite(shard, pa.Table.from_pylist(rows, schema=t.schema), t.schema.metadata)
    err = _audit(shard.parents[5], capsys)
    assert len(err) == 1
    assert f"rollout {first['rollout_id']}" in err[0] and "provenance label" in err[0]
    assert "events.parquet" in err[0] and "events.labels" in err[0]


def test_one_unlabelled_source_is_enough(shard: Path, capsys) -> None:
    t = pq.read_table(shard / "events.parquet")
    rows = t.to_pylist()
    srcs = [r for r in rows if r["kind"] == "source"]
    assert len({r["rollout_id"] for r in srcs}) >= 2
    last = srcs[-1]
    last["labels"] = [lab for lab in last["labels"] if not lab.startswith("taint:")]
    _rewrite(shard, pa.Table.from_pylist(rows, schema=t.schema), t.schema.metadata)
    err = _audit(shard.parents[5], capsys)
    assert len(err) == 1 and f"rollout {last['rollout_id']}" in err[0]
    assert f"source event {last['seq']}" in err[0]


def test_events_without_the_label_column_name_the_file(shard: Path, capsys) -> None:
    t = pq.read_table(shard / "events.parquet")
    _rewrite(shard, t.drop_columns(["labels"]), t.schema.metadata)
    err = _audit(shard.parents[5], capsys)
    assert len(err) == 1 and "events.parquet" in err[0] and "'labels'" in err[0]
