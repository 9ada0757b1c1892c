"""Keyed tamper evidence of a CIM store: an edited row whose chain was recomputed, a deleted
or added events file and an edited manifest field are each named with a key present; without
a key verify-chain says it detects only accidental corruption."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.cim.chain import add_chain
from containmentbench.cli.main import main

KEY = "k" * 32


@pytest.fixture()
def keyed_store(rollout_shard: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    out = tmp_path / "keyed"
    assert main(["cim", "export", "--traces", str(rollout_shard.parent), "--out", str(out),
                 "--chain"]) == 0
    return out


def _verify(store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["cim", "verify-chain", "--store", str(store)])
    return rc, capsys.readouterr().err


def _first(store: Path) -> Path:
    return sorted((store / "events").rglob("*.parquet"))[0]


def test_keyed_store_verifies(keyed_store, capsys):
    assert json.loads((keyed_store / "manifest.json").read_text())["chain_alg"] == "hmac-sha256"
    rc, err = _verify(keyed_store, capsys)
    assert rc == 0 and "only accidental" not in err


def test_recomputed_plain_chain_is_detected(keyed_store, capsys):
    path = _first(keyed_store)
    t = pq.read_table(path).drop_columns(["chain_hash"])
    col = t.column("resource_id").to_pylist()
    col[3] = "doc-forged"
    t = t.set_column(t.schema.get_field_index("resource_id"), "resource_id",
                     pa.array(col, pa.string()))
    t = add_chain(t)  # the forger recomputes the plain sha256 chain ...
    pq.write_table(t, path)
    m = json.loads((keyed_store / "manifest.json").read_text())
    rel = path.relative_to(keyed_store).as_posix()
    m["chain_heads"][rel] = t.column("chain_hash")[-1].as_py()  # ... and the head
    (keyed_store / "manifest.json").write_text(json.dumps(m))
    rc, err = _verify(keyed_store, capsys)
    assert rc == 1
    assert f"{rel}: row 0 " in err  # the first link no longer authenticates
    assert f"file '{rel}': recorded hash changed" in err


def test_deleted_and_added_files_are_named(keyed_store, capsys, tmp_path):
    files = sorted((keyed_store / "events").rglob("*.parquet"))
    rel = files[0].relative_to(keyed_store).as_posix()
    extra = keyed_store / "events" / "workflow=zz" / "day=000" / "bucket=00000"
    extra.mkdir(parents=True)
    shutil.copy(files[0], extra / "part-0.parquet")
    files[0].unlink()
    if len(files) == 1:  # the store needs one events file to open
        pass
    rc, err = _verify(keyed_store, capsys)
    assert rc == 1
    assert f"{rel}: events file removed" in err
    assert "workflow=zz/day=000/bucket=00000/part-0.parquet: events file added" in err


def test_manifest_field_edit_is_named(keyed_store, capsys):
    m = json.loads((keyed_store / "manifest.json").read_text())
    m["n_events"] += 1
    (keyed_store / "manifest.json").write_text(json.dumps(m))
    rc, err = _verify(keyed_store, capsys)
    assert rc == 1 and "metadata field 'n_events' changed" in err


def test_without_key_says_accidental_only(rollout_store, capsys, monkeypatch):
    monkeypatch.delenv("CONTAINMENTBENCH_KEY", raising=False)
    rc, err = _verify(rollout_store, capsys)
    assert rc == 0 and "only accidental corruption is detected" in err


def test_key_file_inside_the_store_is_refused(keyed_store, capsys, monkeypatch):
    kf = keyed_store / "key"
    kf.write_text(KEY)
    monkeypatch.delenv("CONTAINMENTBENCH_KEY")
    monkeypatch.setenv("CONTAINMENTBENCH_KEY_FILE", str(kf))
    rc, err = _verify(keyed_store, capsys)
    assert rc == 2 and "inside the folder it protects" in err and err.count("\n") == 1
