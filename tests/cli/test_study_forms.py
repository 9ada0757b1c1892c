"""One way to say a study (``study=NAME key=value ...``) in every entry point, a one-line error
showing the right form for a wrong one, ``list``, help text on every argument, and a closed
pipe that ends quietly."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from containmentbench.cli.main import CLOSED_PIPE, build_parser, main


def _all_actions():
    def walk(parser, path):
        for a in parser._actions:
            if isinstance(a, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, [*path, name])
                continue
            yield " ".join(path), a
    yield from walk(build_parser(), [])


def test_every_argument_of_every_verb_has_help():
    actions = list(_all_actions())
    assert len(actions) > 250  # every verb's parser was built
    bare = [(verb, a.option_strings or a.dest) for verb, a in actions
            if not a.help or a.help == argparse.SUPPRESS]
    assert bare == []


def _error(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, (argv, err)
    return err[0]


@pytest.mark.parametrize("argv,right", [
    (["status", "full_main"], "containmentbench status study=full_main"),
    (["config", "show", "smoke"], "containmentbench config show study=smoke"),
    (["status", "study=smoke", "backend"], "an override is key=value"),
    (["status"], "say which study: containmentbench status study=NAME"),
    (["headline", "smoke"], "containmentbench headline study=smoke"),
    (["reproduce", "full_main"], "containmentbench reproduce study=full_main"),
    (["report", "nowhere/at/all"], "give a run directory, or study=NAME"),
    (["config", "check", "study=smoke", "seeds=[1]"], "a full key path, e.g. study.seeds=[1]"),
    (["config", "check", "study=smok"], "containmentbench list studies"),
    (["config", "check", "study=full_main", "backend=vllm"], "say model=NAME"),
    (["search", "splits", "adaptive_smoke", "--out", "x.json"],
     "containmentbench search splits study=adaptive_smoke"),
])
def test_wrong_form_gets_one_line_with_the_right_one(argv, right, capsys, tmp_path,
                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert right in _error(capsys, argv)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_same_override_strings_everywhere(tmp_path, capsys):
    """status, config and the Snakemake --config parser take the same strings."""
    from containmentbench.pipeline.snake import overrides_from

    tokens = ["study=smoke", f"results_dir={tmp_path}", "study.seeds=[1]"]
    assert main(["config", "check", *tokens]) == 0
    assert main(["status", *tokens]) == 0
    out = capsys.readouterr().out
    assert "rollouts" in out and "pending" in out and "freeze" in out
    assert overrides_from({"study": "smoke", "results_dir": str(tmp_path),
                           "overrides": ["study.seeds=[1]"]}) == tokens


@pytest.mark.parametrize("kind,expect", [("studies", "full_main"), ("models", "qwen2_5_7b"),
                                         ("defenses", "intent_ledger_v2"),
                                         ("backends", "vllm")])
def test_list(kind, expect, capsys):
    assert main(["list", kind]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"# {kind}") and any(ln.startswith(expect) for ln in out[1:])


def test_closed_pipe_ends_quietly():
    """`containmentbench config show ... | head -1`: the reader is gone before the first
    write; the verb exits 141 (as SIGPIPE would) and prints nothing on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "containmentbench.cli.main", "config",
                             "show", "study=full_main"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # like `head` that has read its line and left
    err = proc.stderr.read()
    assert proc.wait() == CLOSED_PIPE
    assert err == b""
