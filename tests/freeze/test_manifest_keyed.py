"""The study manifest: keyed (HMAC) authentication of metadata and files, figures covered,
paths outside the study refused, metadata checked against the study's own data."""

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
    assert m["auth"]["alg"] == "hmac-sha256" and "simulated_agent" in m["auth"]["fields"]
    assert any(k.startswith("figures/") for k in m["files"])
    rc, err = _verify(keyed, capsys)
    assert rc == 0 and "only accidental" not in err


def test_flipped_simulated_agent_is_detected(keyed, tmp_path, capsys, monkeypatch):
    study = _copy(keyed, tmp_path)
    _edit(study, simulated_agent=False, backends=["vllm"])
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", KEY)
    rc, err = _verify(study, capsys)
    assert rc == 1
    assert "metadata field 'simulated_agent' changed" in err
    assert "metadata field 'backends' changed" in err
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
    assert rc == 1 and f"file '{rel}': recorded hash changed" in err  # ... the key can


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
