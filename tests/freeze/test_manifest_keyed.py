"""The study manifest: one keyed (HMAC) authentication over the whole manifest, figures
covered, paths outside the study refused, metadata checked against the study's own data; no
entry can be spliced in from another manifest, and an older manifest restored with its tables
is recognised by its freeze counter."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from containmentbench.canonical import sha256_file
from tests.conftest import run_cli

KEY = "a-secret-key-of-enough-bytes-0123456789"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mp = pytest.MonkeyPatch()
    mp.setenv("CONTAINMENTBENCH_KEY", KEY)
    root = tmp_path_factory.mktemp("study") / "keyed"
    assert run_cli("rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--out",
                   root / "traces" / "none" / "seed=1", "--quiet") == 0
    assert run_cli("metrics", root / "traces", "--out",
                   root / "metrics" / "rollout_metrics.parquet", "--workers", 1) == 0
    assert run_cli("analyze", root / "metrics" / "rollout_metrics.parquet", "--out", root,
                   "--resamples", 200) == 0
    assert run_cli("freeze", root) == 0
    mp.undo()
    return root


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "copy"
    shutil.copytree(src, dst)
    return dst


def _edit(study: Path, **fields) -> None:
    m = json.loads((study / "MANIFEST.json").read_text())
    m.update(fields)
    (study / "MANIFEST.json").write_text(json.dumps(m))


def _verify(study: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = run_cli("verify", study)
    return rc, capsys.readouterr().err


def test_keyed_manifest_verifies_and_covers_figures(keyed, capsys, monkeypatch):
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    m = json.loads((keyed / "MANIFEST.json").read_text())
    assert m["auth"]["alg"] == "hmac-sha256" and len(m["auth"]["mac"]) == 64
    assert m["freeze"] == 1 and m["previous"] is None
    assert any(k.startswith("figures/") for k in m["files"])
    rc, err = _verify(keyed, capsys)
    assert rc == 0 and "only accidental" not in err


def test_flipped_simulated_agent_is_detected(keyed, tmp_path, capsys, monkeypatch):
    study = _copy(keyed, tmp_path)
    _edit(study, simulated_agent=False, backends=["vllm"])
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    rc, err = _verify(study, capsys)
    assert rc == 1
    assert "MANIFEST.json: authentication failed" in err
    # without a key the study's own data still contradicts the forged metadata
    monkeypatch.delenv("CONTAINMENTBENCH_KEY")
    rc, err = _verify(study, capsys)
    assert rc == 1 and "metadata field 'simulated_agent' does not match" in err
    assert "only accidental corruption is detected" in err


def test_recomputed_file_hash_is_detected_with_a_key(keyed, tmp_path, capsys, monkeypatch):
    study = _copy(keyed, tmp_path)
    fig = sorted((study / "figures").rglob("*.csv"))[0]
    fig.write_text(fig.read_text() + "forged,row\n")
    m = json.loads((study / "MANIFEST.json").read_text())
    rel = fig.relative_to(study).as_posix()
    m["files"][rel] = sha256_file(fig)  # the forger updates the plain hash
    (study / "MANIFEST.json").write_text(json.dumps(m))
    monkeypatch.delenv("CONTAINMENTBENCH_KEY", raising=False)
    assert _verify(study, capsys)[0] == 0  # plain hashes cannot see it ...
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    rc, err = _verify(study, capsys)
    assert rc == 1 and "MANIFEST.json: authentication failed" in err  # ... the key can


def test_removed_and_added_files_are_named(keyed, tmp_path, capsys, monkeypatch):
    study = _copy(keyed, tmp_path)
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    events = sorted((study / "traces").rglob("events.parquet"))[0]
    events.unlink()
    (study / "tables" / "extra.csv").write_text("a\n1\n")
    rc, err = _verify(study, capsys)
    assert rc == 1
    assert f"{events.relative_to(study).as_posix()}: file removed" in err
    assert "tables/extra.csv: file added" in err


def test_paths_outside_the_study_are_not_opened(keyed, tmp_path, capsys):
    study = _copy(keyed, tmp_path)
    m = json.loads((study / "MANIFEST.json").read_text())
    m["files"]["/dev/zero"] = "0" * 64
    m["files"]["../../etc/passwd"] = "0" * 64
    (study / "MANIFEST.json").write_text(json.dumps(m))
    rc, err = _verify(study, capsys)
    assert rc == 1 and err.count("path outside the study (not opened)") == 2


def test_wrong_key_and_key_file_inside(keyed, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", "another-key-of-enough-bytes")
    rc, err = _verify(keyed, capsys)
    assert rc == 1 and "authenticated with another key" in err
    monkeypatch.delenv("CONTAINMENTBENCH_KEY")
    study = _copy(keyed, tmp_path)
    (study / "key").write_text(KEY)
    monkeypatch.setenv("CONTAINMENTBENCH_KEY_FILE", str(study / "key"))
    rc, err = _verify(study, capsys)
    assert rc == 2 and "inside the folder it protects" in err


def _refreeze(study: Path, monkeypatch, capsys, resamples: int) -> None:
    """A legitimate rebuild: analyze again with --force (journalled), then freeze."""
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    assert run_cli("analyze", study / "metrics" / "rollout_metrics.parquet", "--out", study,
                   "--resamples", resamples, "--force") == 0
    assert run_cli("freeze", study) == 0
    capsys.readouterr()


def test_an_entry_spliced_from_an_older_manifest_is_refused(keyed, tmp_path, capsys,
                                                            monkeypatch):
    study = _copy(keyed, tmp_path)
    old = json.loads((study / "MANIFEST.json").read_text())
    old_bytes = {k: (study / k).read_bytes() for k in old["files"] if k.startswith("tables/")}
    _refreeze(study, monkeypatch, capsys, 300)   # other intervals: some tables change
    new = json.loads((study / "MANIFEST.json").read_text())
    changed = sorted(k for k in old_bytes if new["files"].get(k) != old["files"][k])
    assert new["freeze"] == 2 and new["previous"] and changed
    assert _verify(study, capsys)[0] == 0
    t12 = changed[0]
    # the forger puts back the old table with its old digest (a valid MAC'd entry once)
    (study / t12).write_bytes(old_bytes[t12])
    new["files"][t12] = old["files"][t12]
    (study / "MANIFEST.json").write_text(json.dumps(new))
    rc, err = _verify(study, capsys)
    assert rc == 1 and "MANIFEST.json: authentication failed" in err


def test_an_older_manifest_restored_with_its_tables_is_recognised(keyed, tmp_path, capsys,
                                                                  monkeypatch):
    study = _copy(keyed, tmp_path)
    old = {p: p.read_bytes() for p in study.rglob("*") if p.is_file()
           and not any(part.startswith(".") for part in p.relative_to(study).parts)}
    _refreeze(study, monkeypatch, capsys, 300)
    assert _verify(study, capsys)[0] == 0
    for p, data in old.items():  # the old tables, figures and manifest put back
        p.write_bytes(data)
    # this machine saw freeze 2 of the study (its record outside the folder): refused
    rc, err = _verify(study, capsys)
    assert rc == 1 and "is freeze 1, older than freeze 2 this machine last saw" in err
    # elsewhere (no record) it is consistent on its own (an honest old freeze) ...
    monkeypatch.setenv("CONTAINMENTBENCH_STATE_DIR", str(tmp_path / "another-machine"))
    assert _verify(study, capsys)[0] == 0
    capsys.readouterr()
    rc = run_cli("verify", study, "--expect-freeze", 2)
    err = capsys.readouterr().err
    assert rc == 1 and "is freeze 1, expected 2" in err   # ... but recognisably older
