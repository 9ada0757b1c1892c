"""Content carriage for the DCPG: which sources an observed text carries, and how much of a
source a written value shows (its label confidence sigma, paper 001 §3.2).

An observation carries a source when the source's whole text, one of its sentences (at least
``MIN_FRAGMENT`` characters, so a greeting shared by many pages is not provenance) or its
canary appears in it verbatim after normalisation (lower case, whitespace collapsed; JSON
payloads are read as the text of their string values). Verbatim presence is the evidence of
Tier 1-2 at its strongest, so such a label has sigma 1.0.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from containmentbench.audit.evidence import canaries_in, lcs_ratio, norm
from containmentbench.sandbox.tools import TOOLS

MIN_FRAGMENT = 24        # characters of a source sentence that count as carriage
MIN_WRITTEN = 16         # characters of a written value worth remembering (not "internal")
_SENT = re.compile(r"(?<=[.!?])\s+")
_WRITTEN_ROLES = ("content",)


def _leaves(obj: Any, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _leaves(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _leaves(v, out)


@lru_cache(maxsize=32768)
def observed_text(text: str) -> str:
    """The normalised text an observation shows (a JSON payload's string values, or the raw
    text; observations are wrapped by the runtime's prompt as 'Result of tool: {json}')."""
    start = text.find("{") if not text.startswith(("{", "[")) else 0
    for cand in ([text[start:]] if start >= 0 else []) + [text]:
        try:
            obj = json.loads(cand)
        except ValueError:
            continue
        out: list[str] = []
        _leaves(obj, out)
        return norm(" \n ".join(out))
    return norm(text)


@lru_cache(maxsize=32768)
def written_values(tool: str | None, args_json: str) -> tuple[str, ...]:
    """The normalised content values a commit writes (what a later read may show again);
    ``args_json``: the commit's canonical arguments."""
    spec = TOOLS.get(tool or "")
    try:
        args = json.loads(args_json) if args_json else {}
    except ValueError:
        return ()
    if not isinstance(args, dict):
        return ()
    out = []
    for name, v in sorted(args.items()):
        role = spec.role(name) if spec else "content"
        if role not in _WRITTEN_ROLES:
            continue
        text = " ".join(str(x) for x in v) if isinstance(v, list) else str(v)
        n = norm(text)
        if len(n) >= MIN_WRITTEN:
            out.append(n)
    return tuple(out)


@lru_cache(maxsize=8192)
def fingerprint(text: str) -> tuple[str, tuple[str, ...], frozenset[str]]:
    """(whole normalised text, its fragments, its canaries) of one source."""
    n = norm(text)
    frags = {n} if n else set()
    frags |= {norm(s) for s in _SENT.split(text) if len(norm(s)) >= MIN_FRAGMENT}
    return (n or "\x00", tuple(sorted(f for f in frags if f)),
            frozenset(m.lower() for m in canaries_in(text)))


class Carrier:
    """The sources of one rollout and their fingerprints."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.frags: dict[str, tuple[str, ...]] = {}
        self.marks: dict[str, frozenset[str]] = {}
        self.whole: dict[str, str] = {}

    def register(self, sid: str, text: str, seq: int) -> None:
        self.texts[sid] = text
        self.whole[sid], self.frags[sid], self.marks[sid] = fingerprint(text)

    def carried(self, observed: str) -> list[tuple[str, bool]]:
        """Sources whose content the (normalised) observed text shows verbatim, each with
        whether it shows the whole source (the annotated item itself) or a copied part."""
        out = []
        for sid, frags in self.frags.items():
            if any(m in observed for m in self.marks[sid]) or \
                    any(f in observed for f in frags):
                out.append((sid, self.whole[sid] in observed))
        return out

    def sigma(self, sid: str, value: str) -> float:
        """Explicit evidence that a written value shows the source (Tier 1, else Tier 2)."""
        src = self.texts.get(sid, "")
        if any(m in value.lower() for m in self.marks.get(sid, ())):
            return 1.0
        return lcs_ratio(src, value)
