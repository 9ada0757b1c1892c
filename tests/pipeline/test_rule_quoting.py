"""Paths are data (issue: data safety): every path a rule's shell command interpolates is
quoted with Snakemake's ``:q``, in every rule file, including those of optional studies
(adapter, audit) that the smoke pipeline test does not run."""

from __future__ import annotations

import re
from pathlib import Path

RULES = Path(__file__).resolve().parents[2] / "workflow" / "rules"
# {input}, {input.x}, {output}, {output[0]}, {log}, {params.x}, {wildcards.x} without :q
UNQUOTED = re.compile(r"\{((?:input|output|log|params|wildcards)(?:\.\w+|\[\d+\])?)\}")


def _shell_strings(text: str) -> list[str]:
    out = []
    for block in re.finditer(r"^\s*shell:\s*\n((?:\s+(?:\"[^\n]*\"|'[^\n]*')\s*\n)+)", text,
                             flags=re.M):
        out.append(block.group(1))
    return out


def test_every_rule_quotes_its_paths():
    files = sorted(RULES.glob("*.smk"))
    assert files
    seen = 0
    for f in files:
        for shell in _shell_strings(f.read_text()):
            seen += 1
            bad = UNQUOTED.findall(shell)
            assert not bad, f"{f.name}: unquoted {{{bad[0]}}} in shell command: {shell.strip()}"
    assert seen >= 10  # the scan found the rules' shell commands


def test_the_scan_catches_an_unquoted_path():
    text = 'rule x:\n    shell:\n        "containmentbench metrics {input} --out {output:q}"\n'
    assert UNQUOTED.findall(_shell_strings(text)[0]) == ["input"]
