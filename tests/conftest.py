"""Shared fixtures: the committed suites and small helpers to run the CLI in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def smoke():
    from containmentbench.scenarios.manifest import load_suite
    return load_suite(ROOT / "scenarios" / "smoke")


@pytest.fixture(scope="session")
def full_main():
    from containmentbench.scenarios.manifest import load_suite
    return load_suite(ROOT / "scenarios" / "full_main")


@pytest.fixture(scope="session")
def stress():
    from containmentbench.scenarios.manifest import load_suite
    return load_suite(ROOT / "scenarios" / "stress")


def run_cli(*args: str) -> int:
    from containmentbench.cli.main import main
    return main([str(a) for a in args])
