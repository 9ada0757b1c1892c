"""Field-level taint: does an argument's value derive from a prefix-visible tainted source?

For each argument of a proposal the runtime records whether its value derives from untrusted
content the agent has seen rather than from the trusted user goal or the ledger (the input of
Expand, paper 000 §5.4). Derivation is decided on the text the agent saw, without any model
internals:

* identifier-like values (recipients, targets, visibility, field names, and any value of at
  most three words) are tainted when they occur in tainted context and not in trusted text;
* free-text content is tainted when it contains a tainted-only identifier (an address, a date,
  a number, a canary) or when at least a quarter of its word 3-grams occur only in tainted
  context.
"""

from __future__ import annotations

import re
from typing import Any

_WORD = re.compile(r"[a-z0-9@._%+-]+")
_IDENTISH = re.compile(r"[@\d]|cb-canary")
CONTENT_SHARE = 0.25


def _words(text: str) -> list[str]:
    return [w.strip(".,;:") for w in _WORD.findall(text.lower())]


def shingles(text: str) -> set[tuple[str, str, str]]:
    w = _words(text)
    return set(zip(w, w[1:], w[2:]))  # the same 3-grams, built in C


class TextIndex:
    """The text an agent has seen from one trust class, for substring and 3-gram lookups."""

    __slots__ = ("blob", "grams")

    def __init__(self, texts: tuple[str, ...] = ()) -> None:
        self.blob = ""
        self.grams: set[tuple[str, str, str]] = set()
        for t in texts:
            self.add(t)

    def add(self, text: str) -> None:
        low = text.lower()
        self.blob = f"{self.blob}\n{low}" if self.blob else low
        self.grams |= shingles(low)

    def __bool__(self) -> bool:
        return bool(self.blob)


def value_tainted(value: Any, role: str, tainted: TextIndex, trusted: TextIndex) -> bool:
    if not tainted:
        return False
    if isinstance(value, list):
        return any(value_tainted(v, role, tainted, trusted) for v in value)
    v = str(value).strip().lower()
    if not v:
        return False
    if role != "content" or len(v.split()) <= 3:
        return v in tainted.blob and v not in trusted.blob
    for tok in _words(v):
        if _IDENTISH.search(tok) and tok in tainted.blob and tok not in trusted.blob:
            return True
    grams = shingles(v)
    if not grams:
        return False
    hits = sum(1 for g in grams if g in tainted.grams and g not in trusted.grams)
    return hits / len(grams) >= CONTENT_SHARE
