"""The cached sensitivity and bootstrap parts give the same tables bytes as computing them in
``analyze``, and a part computed from other metrics or settings is refused."""

from __future__ import annotations

import pytest

from containmentbench.analysis.outputs import settings_digest
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    d = tmp_path_factory.mktemp("parts")
    for stage in ("security", "active_tainted", "memory_recovery", "clean"):
        for defense in ("tool_boundary", "intent_ledger_v2", "none", "taint_only_v1"):
            assert run_cli("rollout", "--suite", "smoke", "--stage", stage, "--defense",
                           defense, "--seed", 1, "--out", d / "traces" / f"{stage}-{defense}",
                           "--quiet") == 0
    assert run_cli("metrics", d / "traces", "--out", d / "m.parquet", "--workers", 1) == 0
    return d / "m.parquet"


def _tables(out):
    return {p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted((out / "tables").rglob("*")) if p.is_file()}


def test_cached_parts_give_identical_tables(metrics, tmp_path):
    assert run_cli("analyze", metrics, "--out", tmp_path / "direct", "--resamples", 200) == 0
    assert run_cli("sensitivity", metrics, "--out", tmp_path / "s.json",
                   "--resamples", 200) == 0
    assert run_cli("bootstrap", metrics, "--out", tmp_path / "b.json", "--resamples", 200) == 0
    assert run_cli("analyze", metrics, "--out", tmp_path / "cached", "--resamples", 200,
                   "--sensitivity", tmp_path / "s.json", "--bootstrap", tmp_path / "b.json") == 0
    direct, cached = _tables(tmp_path / "direct"), _tables(tmp_path / "cached")
    assert direct and direct == cached
    assert any("table14" in k for k in direct) and any("table25" in k for k in direct)


def test_stale_part_refused(metrics, tmp_path, capsys):
    assert run_cli("bootstrap", metrics, "--out", tmp_path / "b.json", "--resamples", 100) == 0
    capsys.readouterr()
    # other bootstrap settings than the ones analyze is about to use: one-line refusal
    assert run_cli("analyze", metrics, "--out", tmp_path / "o", "--resamples", 200,
                   "--bootstrap", tmp_path / "b.json") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "other analysis settings" in err
    assert not (tmp_path / "o" / "tables").exists()


def test_digest_separates_parts():
    base = {"resamples": 100, "confidence": 0.95, "seed": 1, "max_batch_elements": 10,
            "comparisons": [], "sweep": {}, "divergence": [], "stage_contribution": {},
            "sensitivity": {"a": "x", "b": "y"}, "attribution": []}
    more = {**base, "resamples": 200}
    assert settings_digest(base, "sensitivity") == settings_digest(more, "sensitivity")
    assert settings_digest(base, "bootstrap") != settings_digest(more, "bootstrap")
    other = {**base, "sensitivity": {"a": "x", "b": "z"}}
    assert settings_digest(base, "bootstrap") == settings_digest(other, "bootstrap")
    assert settings_digest(base, "sensitivity") != settings_digest(other, "sensitivity")
    with pytest.raises(KeyError):
        settings_digest(base, "nope")
