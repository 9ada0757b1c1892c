"""freeze / verify / reproduce on a small study folder."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    root = tmp_path_factory.mktemp("study") / "smokey"
    for d in ("none", "intent_ledger_v2"):
        assert run_cli("rollout", "--suite", "smoke", "--defense", d, "--seed", 1, "--out",
                       root / "traces" / d / "seed=1", "--quiet") == 0
    assert run_cli("reparse", root / "traces", "--out", root / "reparse") == 0
    assert run_cli("metrics", root / "traces", "--out",
                   root / "metrics" / "rollout_metrics.parquet", "--workers", 1) == 0
    assert run_cli("analyze", root / "metrics" / "rollout_metrics.parquet", "--out", root,
                   "--resamples", 300, "--reparse", root / "reparse" / "summary.json") == 0
    assert run_cli("freeze", root) == 0
    return root


def test_manifest_contents(frozen):
    m = json.loads((frozen / "MANIFEST.json").read_text())
    assert m["rollouts"] == 32 and m["simulated_agent"] is True
    assert {p["defense"] for p in m["policies"]} == {"none", "intent_ledger_v2"}
    assert m["parser_versions"] and m["packages"]["pyarrow"]
    assert "smoke" in m["scenario_manifests"]
    assert any(k.startswith("tables/table24") for k in m["files"])
    assert not any(k.endswith("timings.parquet") for k in m["files"])
    assert "commit" in m["git"]


def test_verify_and_reproduce(frozen, tmp_path, capsys):
    assert run_cli("verify", frozen) == 0
    assert run_cli("reproduce", frozen, "--workers", 1) == 0
    copy = tmp_path / "copy"
    shutil.copytree(frozen, copy)
    target = copy / "tables" / "table11_utility.csv"
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert run_cli("verify", copy) == 1
    assert "tables/table11_utility.csv" in capsys.readouterr().err
    assert run_cli("reproduce", copy, "--workers", 1) == 1
    assert "DIFFERS tables/table11_utility.csv" in capsys.readouterr().err


def test_verify_without_manifest_is_bad_input(tmp_path):
    assert run_cli("verify", tmp_path) == 2
