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


#: the measurement fields every rollout row carries (trace schema 2), for tests that build
#: rollout rows by hand
ROLLOUT_MEASUREMENT = {
    "decoding": '{"max_tokens":512,"seed_policy":"replicates","temperature":0.7,"top_p":0.95}',
    "tool_mode": "prompt", "completion_digest": "0" * 64, "n_truncated": 0,
    "n_repeated_calls": 0, "n_blocked": 0}
