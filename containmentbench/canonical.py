"""Canonical JSON, hashing and stable seed derivation.

Hashes are sha256 over canonical JSON (sorted keys, no whitespace, UTF-8) for scenarios,
policies and resolved configs, and over file bytes for artifacts (design contract "Hashes").
Seeds never come from a global RNG: every random choice takes a ``numpy.random.Generator``
derived from a ``SeedSequence`` keyed by a stable hash of the names that identify it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np


def canonical_json(obj: Any) -> str:
    """Serialize ``obj`` deterministically: sorted keys, compact separators, no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def stable_int(*parts: Any) -> int:
    """A 64-bit integer that depends only on the given names (no PYTHONHASHSEED)."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def derive_rng(*parts: Any) -> np.random.Generator:
    """A generator keyed by a stable hash of ``parts`` (design contract "Determinism")."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(stable_int(*parts))))


def short_id(*parts: Any, n: int = 12) -> str:
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return hashlib.sha256(key).hexdigest()[:n]
