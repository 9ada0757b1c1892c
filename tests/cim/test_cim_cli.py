"""``containmentbench cim <verb>``: help for every verb, one-line errors, JSON output."""

from __future__ import annotations

import json

import polars as pl
import pytest

from containmentbench.cli.main import main

VERBS = ("export", "generate", "blast-radius", "agents", "externalization", "lineage",
         "divergence", "drift", "misbinding", "reconstruct", "verify-chain", "report")
DELEGATION_VERBS = ("blast-radius", "agents", "externalization", "lineage")


def _rc(argv: list[str]) -> int:
    """Exit status whether ``main`` returns it or argparse raises it (``--help``)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_explains_itself(verb, capsys):
    assert _rc(["cim", verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert "--store" in out or "--traces" in out or "--out" in out


@pytest.mark.parametrize("verb", [v for v in VERBS if v not in ("export", "generate")])
def test_missing_store_is_one_line_exit_2(verb, tmp_path, capsys):
    argv = ["cim", verb, "--store", str(tmp_path / "none")]
    if verb in DELEGATION_VERBS:
        argv += ["--delegation", "d"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a CIM store" in err


def test_export_bad_input(tmp_path, capsys):
    assert main(["cim", "export", "--traces", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no finished trace shards" in capsys.readouterr().err
    assert main(["cim", "export", "--traces", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--format", "xml"]) == 2
    assert "format" in capsys.readouterr().err


def test_queries_print_json(hand_store, capsys):
    for verb in DELEGATION_VERBS:
        assert main(["cim", verb, "--store", str(hand_store), "--delegation", "dA",
                     "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["query"] == verb and doc["rows"]
    assert main(["cim", "drift", "--store", str(hand_store), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["delegation_id"]: r["flagged"] for r in rows}["dA"] is False  # see test_drift.py
    assert main(["cim", "misbinding", "--store", str(hand_store)]) == 0
    assert "n_unbound=1" in capsys.readouterr().out
    assert main(["cim", "divergence", "--store", str(hand_store)]) == 0
    assert main(["cim", "drift", "--store", str(hand_store), "--baseline-frac", "1.5"]) == 2
    assert main(["cim", "reconstruct", "--store", str(hand_store), "--deltas", "a,b"]) == 2


def test_reconstruct_and_report(small_store, tmp_path, capsys):
    out = tmp_path / "per.parquet"
    assert main(["cim", "reconstruct", "--store", str(small_store), "--json", "--out",
                 str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["method"] for r in doc["rows"]} == {"CIM", "CIM-closure", "B0", "B1", "B2"}
    assert pl.read_parquet(out).height > 0
    md = tmp_path / "report.md"
    assert main(["cim", "report", "--store", str(small_store), "--out", str(md)]) == 0
    text = md.read_text()
    for needle in ("Table 5", "Table 6", "Table 7", "Drift detector", "users=40"):
        assert needle in text
