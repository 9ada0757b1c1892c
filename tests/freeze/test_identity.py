"""A keyed study's identity, its journal chain and its readers (issue 37, items 2-4).

* Deleting ``MANIFEST.json`` and ``.frozen-manifest.json`` no longer unfreezes a keyed study:
  the next freeze continues its identity and counter from this machine's record and refuses
  a hand-edited table; traces of a study whose folder no longer holds it are not frozen from
  scratch without ``--new-identity``.
* The journal is one chain per study: a line cut out, lines reordered, a tail cut back with
  an old output copied back from ``.replaced-<n>/``, and lines with their rebuilt bytes copied
  from another study frozen from the same config are all refused by freeze.
* Every reader checks the manifest as verify does: a re-hashed forged table, an empty file
  list and a deleted manifest are refused by ``results.load``, ``report`` and the verbs that
  read a frozen cache.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path

import pytest

from containmentbench import results
from containmentbench.errors import BenchError
from tests.conftest import run_cli

KEY = "another-secret-key-of-enough-bytes-42"
TABLE = "tables/table09_security_positive_control.parquet"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An analysed, unfrozen two-defense study (one seed of smoke)."""
    root = tmp_path_factory.mktemp("identity") / "base"
    for d in ("none", "tool_boundary"):
        assert run_cli("rollout", "--suite", "smoke", "--defense", d, "--seed", 1, "--out",
                       root / "traces" / d / "seed=1", "--quiet") == 0
    assert run_cli("metrics", root / "traces", "--out",
                   root / "metrics" / "rollout_metrics.parquet", "--workers", 1) == 0
    assert run_cli("analyze", root / "metrics" / "rollout_metrics.parquet", "--out", root,
                   "--resamples", 100) == 0
    return root


@pytest.fixture()
def keyed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A function making keyed, frozen copies of the base study (this test's own machine
    record folder)."""
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    monkeypatch.setenv("CONTAINMENTBENCH_STATE_DIR", str(tmp_path / "state"))

    def make(base: Path, name: str = "study") -> Path:
        s = tmp_path / name
        shutil.copytree(base, s)
        assert run_cli("freeze", s) == 0
        return s
    return make


def _manifest(s: Path) -> dict:
    return json.loads((s / "MANIFEST.json").read_text())


def _err(capsys) -> str:
    return capsys.readouterr().err


def _edit_table(s: Path) -> None:
    p = s / "tables" / "table09_security_positive_control.csv"
    p.write_text(p.read_text().replace("0.", "1.", 1))


def _rebuild(s: Path, resamples: int) -> None:
    """A legitimate rebuild (journalled): analyze again with --force."""
    assert run_cli("analyze", s / "metrics" / "rollout_metrics.parquet", "--out", s,
                   "--resamples", resamples, "--force") == 0


# ------------------------------------------------------------------ item 2: the head

def test_deleting_both_manifests_does_not_unfreeze_a_keyed_study(base, keyed, capsys):
    s = keyed(base)
    first = _manifest(s)
    assert first["freeze"] == 1 and len(first["study_id"]) == 32
    (s / "MANIFEST.json").unlink()
    (s / ".frozen-manifest.json").unlink()
    _edit_table(s)
    # every reader refuses the study: this machine's record says it is frozen ...
    with pytest.raises(BenchError, match=r"is frozen \(freeze 1, this machine's record\)"):
        results.load(s)
    capsys.readouterr()
    assert run_cli("verify", s) == 1
    assert "no MANIFEST.json, but the study is frozen (freeze 1, kept in this machine's " \
        "record)" in _err(capsys)
    assert run_cli("freeze", s) == 1  # ... and freeze refuses the hand-edited table
    err = _err(capsys)
    assert "continues from this machine's record of freeze 1" in err
    assert "tables/table09_security_positive_control.csv: changed since the last freeze" in err
    assert not (s / "MANIFEST.json").exists()
    with pytest.raises(BenchError, match=r"MANIFEST\.json is missing but the study is frozen"):
        results.load(s)
    # ... the refused freeze put the recorded manifest back as the copy, so a rebuild is
    # journalled again; then the study continues: same identity, freeze 2
    assert json.loads((s / ".frozen-manifest.json").read_text()) == first
    _rebuild(s, 100)
    assert run_cli("freeze", s) == 0
    second = _manifest(s)
    assert second["freeze"] == 2 and second["study_id"] == first["study_id"]
    assert run_cli("verify", s, "--expect-freeze", 1) == 1
    assert run_cli("verify", s, "--expect-freeze", 2) == 0


def test_moved_traces_are_not_frozen_from_scratch_silently(base, keyed, capsys, tmp_path):
    s = keyed(base)
    sid = _manifest(s)["study_id"]
    moved = tmp_path / "moved"
    s.rename(moved)
    (moved / "MANIFEST.json").unlink()
    (moved / ".frozen-manifest.json").unlink()
    capsys.readouterr()
    assert run_cli("freeze", moved) == 1
    err = _err(capsys)
    assert f"these traces are those of study {sid}" in err and "--new-identity" in err
    assert not (moved / "MANIFEST.json").exists()
    assert run_cli("freeze", moved, "--new-identity") == 0
    m = _manifest(moved)
    assert m["freeze"] == 1 and m["study_id"] != sid
    # a twin (the same config frozen in two folders, both still frozen) is no such case
    twin = keyed(base, "twin")
    assert _manifest(twin)["study_id"] not in (sid, m["study_id"])


def test_an_older_manifest_of_this_study_is_refused_by_freeze(base, keyed, capsys):
    s = keyed(base)
    old = {p: p.read_bytes() for p in s.rglob("*") if p.is_file()
           and not any(part.startswith(".") for part in p.relative_to(s).parts)}
    _rebuild(s, 300)
    assert run_cli("freeze", s) == 0
    for p, data in old.items():
        p.write_bytes(data)
    (s / ".frozen-manifest.json").write_bytes(old[s / "MANIFEST.json"])
    capsys.readouterr()
    assert run_cli("freeze", s) == 1
    assert "is freeze 1, older than freeze 2 this machine last saw" in _err(capsys)


# ------------------------------------------------------------------ item 3: one chain

def _journal(s: Path) -> list[bytes]:
    return (s / ".rebuilt.jsonl").read_bytes().splitlines(keepends=True)


def test_journal_lines_form_a_chain_bound_to_the_study(base, keyed):
    s = keyed(base)
    _rebuild(s, 300)
    lines = [json.loads(x) for x in _journal(s)]
    sid = _manifest(s)["study_id"]
    assert lines and all(e["study"] == sid and e["v"] == 2 and len(e["mac"]) == 64
                         for e in lines)
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    raw = _journal(s)
    for prev, line in itertools.pairwise(raw):
        assert json.loads(line)["prev"] == hashlib.sha256(prev.rstrip(b"\n")).hexdigest()
    assert run_cli("freeze", s) == 0
    assert _manifest(s)["journal"]["seq"] == len(lines)


@pytest.mark.parametrize("how", ["cut_middle", "reorder"])
def test_a_line_cut_out_or_reordered_is_refused(base, keyed, capsys, how):
    s = keyed(base)
    _rebuild(s, 300)
    raw = _journal(s)
    assert len(raw) >= 3
    if how == "cut_middle":
        raw = raw[:1] + raw[2:]
    else:
        raw[0], raw[1] = raw[1], raw[0]
    (s / ".rebuilt.jsonl").write_bytes(b"".join(raw))
    capsys.readouterr()
    assert run_cli("freeze", s) == 1
    assert "does not continue the chain" in _err(capsys)


def test_a_tail_cut_back_with_an_old_output_copied_back_is_refused(base, keyed, capsys):
    """Rebuilt twice; the second rebuild's lines cut off and the first rebuild's table put
    back from .replaced-<n>/: the chain is valid but shorter than this machine's record."""
    s = keyed(base)
    _rebuild(s, 300)
    n1 = len(_journal(s))
    first = {p.relative_to(s).as_posix(): p.read_bytes() for p in s.rglob("*") if p.is_file()
             and not any(part.startswith(".") for part in p.relative_to(s).parts)}
    _rebuild(s, 500)
    changed = sorted(r for r, data in first.items() if (s / r).read_bytes() != data
                     and r != "MANIFEST.json")
    assert any(r.startswith("tables/") for r in changed)
    raw = _journal(s)
    (s / ".rebuilt.jsonl").write_bytes(b"".join(raw[:n1]))
    for rel in changed:  # the output the owner replaced, copied back from .replaced-<n>/
        kept = [p for p in s.glob(".replaced-*/" + rel) if p.read_bytes() == first[rel]]
        assert kept, rel
        (s / rel).write_bytes(kept[0].read_bytes())
    capsys.readouterr()
    assert run_cli("freeze", s) == 1
    assert "was cut back" in _err(capsys)


def test_lines_and_bytes_from_another_study_are_refused(base, keyed, capsys):
    """Two keyed studies frozen from one config (identical bytes, so one manifest digest
    before the study id): one's rebuilt one-defense metrics and its journal copied into the
    other were signed into it."""
    a, b = keyed(base, "a"), keyed(base, "b")
    assert _manifest(a)["files"] == _manifest(b)["files"]
    assert run_cli("metrics", a / "traces" / "none", "--out",
                   a / "metrics" / "rollout_metrics.parquet", "--workers", 1, "--force") == 0
    shutil.copy(a / "metrics" / "rollout_metrics.parquet", b / "metrics")
    shutil.copy(a / ".rebuilt.jsonl", b / ".rebuilt.jsonl")
    capsys.readouterr()
    assert run_cli("freeze", b) == 1
    err = _err(capsys)
    assert "belongs to another study" in err
    assert run_cli("freeze", a) == 0  # in its own study the same line is the rebuild


def test_a_journal_that_is_a_link_or_a_fifo_refuses_before_anything_moves(base, keyed,
                                                                          tmp_path):
    """A FIFO or a link to /dev/zero named .rebuilt.jsonl hung a forced verb, which had
    already moved its covered file aside; a link to any file was appended to."""
    import os
    import subprocess
    import sys

    cli = str(Path(sys.executable).parent / "containmentbench")
    for kind in ("symlink", "fifo", "devzero"):
        s = keyed(base, kind)
        j = s / ".rebuilt.jsonl"
        j.unlink(missing_ok=True)
        victim = tmp_path / f"victim-{kind}.txt"
        victim.write_text("not a journal\n")
        if kind == "symlink":
            j.symlink_to(victim)
        elif kind == "fifo":
            os.mkfifo(j)
        else:
            j.symlink_to("/dev/zero")
        before = {p: p.read_bytes() for p in (s / "tables").iterdir()}
        res = subprocess.run([cli, "analyze", str(s / "metrics" / "rollout_metrics.parquet"),
                              "--out", str(s), "--resamples", "300", "--force"],
                             capture_output=True, text=True, timeout=120)
        err = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(err) == 1 and "journal" in err[0], (kind, err)
        assert {p: p.read_bytes() for p in (s / "tables").iterdir()} == before, kind
        assert not list(s.glob(".replaced-*")), kind
        assert victim.read_text() == "not a journal\n"


# ------------------------------------------------------------------ item 4: readers

def _forge_with_rehash(s: Path) -> None:
    """A forged table with its plain hash recomputed in the manifest (the MAC not)."""
    p = s / TABLE
    import pyarrow.parquet as pq

    t = pq.read_table(p)
    pq.write_table(t.replace_schema_metadata({**(t.schema.metadata or {}), b"x": b"1"}), p)
    m = _manifest(s)
    m["files"][TABLE] = hashlib.sha256(p.read_bytes()).hexdigest()
    text = json.dumps(m, indent=2, sort_keys=True) + "\n"
    (s / "MANIFEST.json").write_text(text)
    (s / ".frozen-manifest.json").write_text(text)


def test_results_load_checks_the_mac(base, keyed, monkeypatch):
    s = keyed(base)
    assert results.load(s).table("table09_security_positive_control").height > 0
    _forge_with_rehash(s)
    with pytest.raises(BenchError, match="authentication failed"):
        results.load(s)
    monkeypatch.delenv("CONTAINMENTBENCH_KEY")  # without the key only hashes are checked
    assert results.load(s).table("table09_security_positive_control").height > 0


def test_an_empty_file_list_or_a_deleted_manifest_is_refused_by_readers(base, keyed,
                                                                        monkeypatch, capsys):
    s = keyed(base)
    monkeypatch.delenv("CONTAINMENTBENCH_KEY")
    m = _manifest(s)
    m["files"] = {}
    (s / "MANIFEST.json").write_text(json.dumps(m))
    with pytest.raises(BenchError, match="lists no files"):
        results.load(s)
    capsys.readouterr()
    assert run_cli("report", s, "--out", s.parent / "r1") == 2
    assert "lists no files" in _err(capsys)
    (s / "MANIFEST.json").unlink()  # the manifest's copy still holds the study frozen
    with pytest.raises(BenchError, match=r"MANIFEST\.json is missing but the study is frozen"):
        results.load(s)
    assert run_cli("report", s, "--out", s.parent / "r2") == 2
    assert "missing but the study is frozen" in _err(capsys)
    assert not (s.parent / "r1").exists() and not (s.parent / "r2").exists()


def test_verbs_reading_a_frozen_cache_check_the_mac(base, keyed, capsys):
    s = keyed(base)
    boot = s / "analysis" / "boot.json"
    assert run_cli("bootstrap", s / "metrics" / "rollout_metrics.parquet", "--resamples", 50,
                   "--out", boot, "--force") == 0
    assert run_cli("freeze", s) == 0
    doc = json.loads(boot.read_text())
    doc["edited"] = True
    boot.write_text(json.dumps(doc))
    m = _manifest(s)
    m["files"]["analysis/boot.json"] = hashlib.sha256(boot.read_bytes()).hexdigest()
    (s / "MANIFEST.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    capsys.readouterr()
    rc = run_cli("analyze", s / "metrics" / "rollout_metrics.parquet", "--resamples", 50,
                 "--bootstrap", boot, "--out", s, "--force")
    assert rc == 2 and "authentication failed" in _err(capsys)


# ------------------------------------------------------------------ item 8: keying a study

def test_freeze_key_keys_a_study_frozen_without_one(base, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CONTAINMENTBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CONTAINMENTBENCH_KEY", raising=False)
    s = tmp_path / "study"
    shutil.copytree(base, s)
    assert run_cli("freeze", s) == 0
    capsys.readouterr()
    assert run_cli("freeze", s, "--key") == 2   # no key set: what to do, in one line
    err = _err(capsys).strip().splitlines()
    assert len(err) == 1 and "set CONTAINMENTBENCH_KEY_FILE" in err[0]
    assert run_cli("verify", s) == 0
    assert "freeze DIR --key keys a study" in _err(capsys)
    key = tmp_path / "key"
    key.write_text(KEY)
    monkeypatch.setenv("CONTAINMENTBENCH_KEY_FILE", str(key))
    assert run_cli("freeze", s) == 1   # a keyed freeze of an unkeyed study: says how
    assert "containmentbench freeze <run directory> --key keys the study" in _err(capsys)
    _edit_table(s)
    assert run_cli("freeze", s, "--key") == 1   # the study must still match its manifest
    assert "changed since the last freeze" in _err(capsys)
    assert not isinstance(_manifest(s).get("auth"), dict)
    # with the key set, an unkeyed study is refused by every reader (as verify refuses it),
    # naming the command that keys it; rebuilt without the key, put right on its journal
    assert run_cli("analyze", s / "metrics" / "rollout_metrics.parquet", "--out", s,
                   "--resamples", 100, "--force") == 2
    assert "freeze <run directory> --key keys the study" in _err(capsys)
    monkeypatch.delenv("CONTAINMENTBENCH_KEY_FILE")
    _rebuild(s, 100)
    monkeypatch.setenv("CONTAINMENTBENCH_KEY_FILE", str(key))
    sid = _manifest(s)["study_id"]
    assert run_cli("freeze", s, "--key") == 0
    m = _manifest(s)
    assert m["freeze"] == 2 and m["study_id"] == sid and len(m["auth"]["mac"]) == 64
    keyed_line = json.loads(_journal(s)[-1])
    assert keyed_line["kind"] == "key" and keyed_line["path"] == "MANIFEST.json"
    assert len(keyed_line["mac"]) == 64
    assert list((tmp_path / "state" / "heads").glob(f"{sid}-*.json"))
    assert run_cli("verify", s) == 0
    assert run_cli("freeze", s, "--key") == 2
    assert "keyed already" in _err(capsys)
    monkeypatch.delenv("CONTAINMENTBENCH_KEY_FILE")
    capsys.readouterr()
    assert run_cli("verify", s) == 0
    assert f"is keyed (key id {m['auth']['key_id']}) but no key is set" in _err(capsys)
