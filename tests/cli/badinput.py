"""The bad-input contract, shared by the bad-input tests of every verb and file kind: exit 2,
ONE line on stderr starting ``containmentbench`` and naming the file or field, no
traceback, and nothing written or removed below the case's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from containmentbench.cli.main import main

# bad-input cases run by this session (printed by test_bad_inputs_property's last test)
CASES: dict[str, int] = {"run": 0}


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], root: Path,
                   needles: tuple[str, ...]) -> str:
    """Run one verb; assert the contract; return the line."""
    CASES["run"] += 1
    before = files(root)
    capsys.readouterr()
    rc = main(argv)
    cap = capsys.readouterr()
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert rc == 2, (argv, rc, cap.err[-800:])
    assert len(lines) == 1, (argv, lines[:5])
    assert lines[0].startswith("containmentbench") and "error:" in lines[0]
    assert "Traceback" not in cap.err
    assert any(n in lines[0] for n in needles), (needles, lines[0])
    assert files(root) == before, argv  # nothing written, nothing removed
    return lines[0]
