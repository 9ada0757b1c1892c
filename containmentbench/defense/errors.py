"""Errors of the defense API: each a one-line message naming the defense (exit 2 where it is a
configuration error; inside a rollout, an error row)."""

from __future__ import annotations

from containmentbench.errors import BenchError


class DefenseError(BenchError):
    """A defense that cannot be used: not importable, an unknown hook, a malformed result,
    an undeclared assumption. One line naming the defense (and hook and scenario when known)."""


class HookError(DefenseError):
    """A hook raised or returned something malformed inside a rollout: the rollout ends as an
    error row (never an outcome, never a block)."""


class UndeclaredAssumption(DefenseError):
    """A hook read knowledge its defense did not declare in ``assumes``."""
