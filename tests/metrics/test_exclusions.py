"""Why a rollout is not an outcome (metrics ``error_kind``): the metrics layer tells a
context overflow from any other provider error with the runtime's own test."""

from __future__ import annotations

import pytest

from containmentbench.metrics.compute import error_kind
from containmentbench.runtime.job import is_context_overflow


@pytest.mark.parametrize("status,error,want", [
    ("ok", None, None),
    ("step_limit", None, None),           # an outcome: the agent ran out of steps
    ("repeat_limit", None, None),
    ("error", "context overflow: prompt has 9000 tokens", "context_overflow"),
    ("error", "Context Overflow: HTTP 400: too long", "context_overflow"),
    ("error", "HTTP 400: maximum length", "provider_error"),  # only the explicit prefix
    ("error", None, "provider_error"),
])
def test_error_kind(status, error, want):
    assert error_kind({"status": status, "error": error}) == want
    if status == "error":
        assert (want == "context_overflow") == is_context_overflow(error)
