"""``reproduce`` on an AgentDojo run directory (paper 000 §6.4, §6.6): the adapter metrics,
parity counts and tables rebuilt from the cached adapter traces are byte-identical to the
frozen ones; a changed byte in a table is named and fails both reproduce and verify.

One suite (banking) and two defenses, through the same verbs the Snakemake rules call
(``workflow/rules/agentdojo.smk`` then ``workflow/rules/reproduce.smk``)."""

from __future__ import annotations

import pytest

pytest.importorskip("agentdojo")

from containmentbench.cli.main import main


def _run_study(tmp_path):
    from containmentbench.config.compose import load_study, save_resolved
    from containmentbench.pipeline.plan import shards, study_dir

    data = load_study(["study=agentdojo_smoke", "study.adapter.suites=[banking]",
                       "study.defenses=[none,intent_ledger_v2]", f"results_dir={tmp_path}"])
    sd = study_dir(data)
    cfg = sd / "config.yaml"
    save_resolved(data, cfg)
    q = sd / "qualification" / "banking.json"
    assert main(["adapters", "agentdojo-qualify", "--study-config", str(cfg), "--suite",
                 "banking", "--out", str(q)]) == 0
    plan = shards(data)
    assert len(plan) == 2
    for s in plan:
        assert main(["adapters", "agentdojo", "--study-config", str(cfg), "--shard", s.id,
                     "--qualification", str(q), "--out", str(sd / "traces" / s.id)]) == 0
    m = sd / "metrics" / "rollout_metrics.parquet"
    assert main(["adapters", "metrics", str(sd / "traces"), "--out", str(m),
                 "--workers", "1"]) == 0
    assert main(["adapters", "parity", str(sd / "traces"), "--out",
                 str(sd / "adapter" / "parity.json")]) == 0
    assert main(["analyze", str(m), "--out", str(sd), "--config", str(cfg),
                 "--resamples", "200"]) == 0
    assert main(["freeze", str(sd)]) == 0 and main(["verify", str(sd)]) == 0
    return sd


def test_adapter_reproduce_identical_then_tamper_named(tmp_path, capsys):
    from containmentbench.freeze.manifest import reproduce

    sd = _run_study(tmp_path)
    res = reproduce(sd, 1)
    # metrics, parity and every table are compared, not skipped
    assert res["differ"] == [] and res["compared"] >= 7
    capsys.readouterr()
    assert main(["reproduce", str(sd), "--workers", "1"]) == 0
    assert "byte-identical" in capsys.readouterr().err

    table = sorted((sd / "tables").glob("*.csv"))[0]
    rel = table.relative_to(sd).as_posix()
    raw = table.read_bytes()
    table.write_bytes(raw[:-2] + bytes([raw[-2] ^ 1]) + raw[-1:])  # one changed byte
    assert main(["reproduce", str(sd), "--workers", "1"]) == 1
    assert f"DIFFERS {rel}" in capsys.readouterr().err
    assert main(["verify", str(sd)]) != 0
    assert rel in capsys.readouterr().err
    table.write_bytes(raw)

    # the parity counts are rebuilt too: a changed count is named
    parity = sd / "adapter" / "parity.json"
    parity.write_text(parity.read_text().replace('"ok":true', '"ok":false'))
    assert reproduce(sd, 1)["differ"] == ["adapter/parity.json"]
