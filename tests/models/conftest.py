"""Fixtures for the model-backend tests: a tiny random-weight Qwen2 chat model, built offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:  # `tests.models.tiny_model` and an uninstalled checkout
    sys.path.insert(0, str(_REPO_ROOT))

from tests.models.tiny_model import build_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with a 2-layer Qwen2 model (random weights, seed 0) and its 512-token tokenizer."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))
