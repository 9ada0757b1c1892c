"""Sink-time explicit evidence: the four tiers of the Hybrid Semantic Tracker (paper 001 §4.2).

* Tier 1, canary: a token ``NT-xxxx-xxxx`` appended to a source result at source time
  (:func:`canary_for`); its verbatim presence in a sink argument scores 1.0 (eq. sigma_1).
* Tier 2, normalised LCS: |LCS(src, sink)| / min(|src|, |sink|) (eq. sigma_2) over word
  tokens without stop words (characters would make almost any short argument a subsequence
  of a long page), computed with rapidfuzz's LCSseq.
* Tier 3, embedding cosine of all-MiniLM-L6-v2 sentence embeddings (eq. sigma_3).
* Tier 4, multi-fragment coverage: the source is cut into k-sentence chunks; the best chunk
  cosine is the score, and coverage is the share of the sink argument's tokens found in the
  chunks whose cosine reaches the semantic threshold.

Scores are pure functions of the texts; thresholds are applied later (:mod:`.decide`), so one
scoring pass serves every threshold profile of the Figure 4 sweep.
"""

from __future__ import annotations

import hashlib
import re

from rapidfuzz.distance import LCSseq

CANARY_RE = re.compile(r"\bNT-[0-9a-f]{4}-[0-9a-f]{4}\b")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9@._%+-]*[a-z0-9]|[a-z0-9]")
_SENT = re.compile(r"(?<=[.!?])\s+")
_STOP_WORDS = """a an the and or but if of to in on at by for with from as is are was were be
been being it its this that these those we you your our i he she they them his her their
me my us do does did done will would should can could may might must have has had not no so
than then there here please just also all any some each per via into about over up out"""
STOP = frozenset(_STOP_WORDS.split())


def canary_for(source_id: str) -> str:
    """The Tier 1 token of one source (deterministic, so suites and audits agree)."""
    h = hashlib.sha256(f"neurotaint-canary:{source_id}".encode()).hexdigest()
    return f"NT-{h[:4]}-{h[4:8]}"


def canaries_in(text: str) -> set[str]:
    return set(CANARY_RE.findall(text))


_IDENT = re.compile(r"[@\d]")


def tokens(text: str) -> list[str]:
    """Word tokens without stop words and without one-letter fragments ("year's" -> year)."""
    return [t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and t not in STOP]


def lcs_ratio(src_tokens: list[str], sink_tokens: list[str]) -> float:
    """sigma_2 of paper 001 §4.2 on word tokens. A common subsequence of one ordinary word
    (say "team" against a two-word subject) is not lexical provenance and scores 0; one shared
    identifier (an address, a number, a date) is, and keeps its ratio."""
    if not src_tokens or not sink_tokens:
        return 0.0
    n = LCSseq.similarity(src_tokens, sink_tokens)
    if n == 1 and not any(_IDENT.search(t) for t in set(src_tokens) & set(sink_tokens)):
        return 0.0
    return n / min(len(src_tokens), len(sink_tokens))


def chunks(text: str, k: int) -> list[str]:
    """k-sentence chunks of a source (Tier 4)."""
    sents = [s for s in _SENT.split(text.strip()) if s]
    if len(sents) <= k:
        return []
    return [" ".join(sents[i:i + k]) for i in range(0, len(sents), k)]


def coverage(sink_tokens: list[str], matched_chunks: list[str]) -> float:
    """Share of the sink argument's tokens that occur in the matched chunks."""
    if not sink_tokens or not matched_chunks:
        return 0.0
    seen: set[str] = set()
    for c in matched_chunks:
        seen.update(tokens(c))
    return sum(1 for t in sink_tokens if t in seen) / len(sink_tokens)
