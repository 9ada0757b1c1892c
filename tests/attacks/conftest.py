from __future__ import annotations

import pytest


@pytest.fixture
def adaptive_data(tmp_path):
    """The adaptive_smoke study composed with its results under tmp_path."""
    from containmentbench.config.compose import load_study

    def make(*overrides: str):
        return load_study(["study=adaptive_smoke", f"results_dir={tmp_path}/results",
                           *overrides])
    return make
