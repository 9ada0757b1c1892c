"""The hash chain detects an edited, deleted or truncated event and names the first one."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from containmentbench.cim.chain import GENESIS, canonical_event, chain_hashes, verify_chain
from containmentbench.cim.store import Store
from containmentbench.cli.main import main


def _copy(store: Path, tmp_path: Path) -> tuple[Store, str]:
    dst = tmp_path / "copy"
    shutil.copytree(store, dst)
    s = Store(dst)
    return s, s.files[0]


def _rewrite(path: Path, table: pa.Table) -> None:
    pq.write_table(table, path)


def _heads(s: Store) -> dict[str, str]:
    return json.loads((s.root / "manifest.json").read_text())["chain_heads"]


def test_chain_formula_independently(rollout_store):
    s = Store(rollout_store)
    t = pq.read_table(s.root / s.files[0])
    rows = t.drop_columns(["chain_hash"]).to_pylist()
    h = GENESIS
    for i in range(3):  # h_i = sha256(h_{i-1} || canonical(e_i))
        h = hashlib.sha256(h.encode() + canonical_event(rows[i])).hexdigest()
        assert t.column("chain_hash")[i].as_py() == h
    assert chain_hashes(t.drop_columns(["chain_hash"])) == t.column("chain_hash").to_pylist()
    assert verify_chain(s.root, s.files, _heads(s)) == []


def test_edited_event_is_named(rollout_store, tmp_path):
    s, rel = _copy(rollout_store, tmp_path)
    t = pq.read_table(s.root / rel)
    i = 7
    victim = t.column("event_id")[i].as_py()
    col = t.column("resource_id").to_pylist()
    col[i] = "doc-forged"
    _rewrite(s.root / rel, t.set_column(t.schema.get_field_index("resource_id"), "resource_id",
                                        pa.array(col, pa.string())))
    brk = verify_chain(s.root, s.files, _heads(s))[0]
    assert brk.event_id == victim and brk.row == i and brk.file == rel
    assert main(["cim", "verify-chain", "--store", str(s.root)]) == 1


def test_deleted_event_breaks_the_next(rollout_store, tmp_path):
    s, rel = _copy(rollout_store, tmp_path)
    t = pq.read_table(s.root / rel)
    nxt = t.column("event_id")[5].as_py()
    keep = pc.not_equal(pa.array(range(t.num_rows)), 4)
    _rewrite(s.root / rel, t.filter(keep))
    brk = verify_chain(s.root, s.files, _heads(s))[0]
    assert brk.event_id == nxt


def test_truncation_caught_by_manifest_head(rollout_store, tmp_path):
    s, rel = _copy(rollout_store, tmp_path)
    t = pq.read_table(s.root / rel)
    _rewrite(s.root / rel, t.slice(0, t.num_rows - 2))
    brk = verify_chain(s.root, s.files, _heads(s))[0]
    assert "head" in brk.reason


def test_unchained_store_is_bad_input(hand_store, capsys):
    assert main(["cim", "verify-chain", "--store", str(hand_store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--chain" in err
