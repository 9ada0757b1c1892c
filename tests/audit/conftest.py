"""Shared helpers of the audit tests: a deterministic bag-of-words embedder stands in for
MiniLM where a test pins the audit's logic rather than the model (the real model has its own
slow test)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from containmentbench.audit.evidence import tokens


class BagEmbedder:
    """Unit-norm hashed bag of words: cosine = word overlap, reproducible, no model."""

    dim = 256

    def __init__(self) -> None:
        self.encoded = 0

    def prefetch(self, texts: list[str]) -> None:
        pass

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in tokens(t):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            if n:
                out[i] /= n
        self.encoded += len(texts)
        return out


@pytest.fixture
def bag() -> BagEmbedder:
    return BagEmbedder()
