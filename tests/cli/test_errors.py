"""Every verb turns bad input into one line on stderr naming the file or field, exit 2,
before anything is written; --help explains each verb."""

from __future__ import annotations

import io
import sys

import pytest

from containmentbench.cli.main import build_parser, main


def _one_line_error(capsys, argv, code=2):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == code, (argv, err)
    assert len(err) == 1 and "error" in err[0], err
    return err[0]


@pytest.mark.parametrize("argv,needle", [
    (["rollout", "--suite", "smoke", "--defense", "wat", "--seed", 1, "--out", "{tmp}/x"],
     "defense"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--scenarios", "nope",
      "--out", "{tmp}/x"], "scenarios"),
    (["rollout", "--suite", "nosuch", "--defense", "none", "--seed", 1, "--out", "{tmp}/x"],
     "suite"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--backend", "gpt9",
      "--out", "{tmp}/x"], "backend"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--sim-profile",
      "reckless", "--out", "{tmp}/x"], "sim_profile"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--out", "{tmp}/x"], "seed"),
    (["rollout", "--study-config", "{tmp}/missing.yaml", "--shard", "a"], "missing.yaml"),
    (["metrics", "{tmp}", "--out", "{tmp}/m.parquet"], "shards"),
    (["analyze", "{tmp}/nothing.parquet", "--out", "{tmp}/a"], "nothing.parquet"),
    (["analyze", "{tmp}/nothing.parquet", "--out", "{tmp}/a", "--resamples", 0], "resamples"),
    (["analyze", "{tmp}/nothing.parquet", "--out", "{tmp}/a", "--analysis", "nope"],
     "analysis"),
    (["freeze", "{tmp}"], "metrics"),
    (["reproduce", "{tmp}"], "analysis.json"),
    (["reparse", "{tmp}", "--out", "{tmp}/r", "--disable", "nonsense"], "disable"),
    (["status", "study=smoke", "bogus=1"], "bogus"),
    (["config", "check", "study.seeds=[]"], "study.seeds"),
    (["scenarios", "show", "xx-nope"], "scenario_id"),
    (["scenarios", "check", "--suite", "{tmp}/none"], "suite"),
])
def test_bad_input_one_line_exit_2(argv, needle, tmp_path, capsys):
    argv = [str(a).replace("{tmp}", str(tmp_path)) for a in argv]
    before = sorted(tmp_path.rglob("*"))
    line = _one_line_error(capsys, argv)
    assert needle in line
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_argparse_errors_are_one_line(capsys):
    line = _one_line_error(capsys, ["rollout", "--seed", "abc"])
    assert "invalid int value" in line


def test_parse_stream_bad_line(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "hi"}\nnot json\n'))
    line = _one_line_error(capsys, ["parse"])
    assert ":2" in line


def test_every_verb_has_help(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    for verb, p in sub.choices.items():
        text = p.format_help()
        assert verb in text and len(text) > 80, verb


def test_top_level_help_lists_every_verb(capsys):
    """``containmentbench --help`` prints each verb's one-line help (a bare % in one of them
    made argparse raise TypeError here)."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    assert all(verb in out for verb in sub.choices)
    assert "95% intervals" in out
