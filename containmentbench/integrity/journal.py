"""The journal of a frozen study (``.rebuilt.jsonl``): one chain per study (issue 37, item 3).

A verb that changes a covered file of a frozen study appends one line (the writer,
``integrity/atomic.py``, under a lock on the journal). Each line carries

* ``study``: the study's identity, a random id fixed at its first freeze (the manifest's
  ``study_id``), so a line copied from another study's journal is not this study's;
* ``seq`` and ``prev``: its position and the sha256 of the previous line's bytes; the first
  line after a freeze chains to the manifest's ``journal`` anchor (the last line's position
  and digest when it was written), the first line of a study to :func:`genesis`;
* ``base``: the sha256 of the manifest it was written under;
* ``path``, ``kind``, ``old``, ``new``: the file, the kind of output, its sha256 before and
  after (None: absent); with a key, ``mac`` over all of the above (required on every line
  of a study whose manifest is keyed).

:func:`follow` reads the chain from a manifest's anchor to the end: a line cut out, a line
moved, reordered or copied from another study breaks it and is named; lines before the
anchor are history of earlier freezes. A tail cut back is still a valid chain, only a shorter
one: the per-user record of the last line this machine appended (``integrity/heads.py``)
catches that. Journals written before the chain (lines without ``v``) count only under a
manifest written before it too, as they did then.

This module only reads; the writer appends.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

JOURNAL = ".rebuilt.jsonl"
VERSION = 2
#: a journal longer than this is refused, not read
LIMIT = 256 << 20


def genesis(study_id: str | None) -> str:
    """Where the chain of a study with no line yet starts."""
    return hashlib.sha256(f"containmentbench-journal\0{study_id}".encode()).hexdigest()


def digest(raw: bytes) -> str:
    """The sha256 of one line's bytes (without its newline): the next line's ``prev``."""
    return hashlib.sha256(raw.rstrip(b"\n")).hexdigest()


@dataclass
class Chain:
    """The journal followed from a manifest's anchor: where it ends, what it rebuilt."""

    seq: int
    head: str
    rebuilt: dict[str, str | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: seq -> digest of every chained line followed (a per-user head is looked up here)
    seen: dict[int, str] = field(default_factory=dict)
    #: the highest ``seq`` of any line in the file (a new identity starts above it)
    top: int = 0


def anchor(manifest: dict[str, Any] | None) -> tuple[int, str]:
    """(seq, digest) the chain continues from after ``manifest`` (a manifest written before
    the chain: from the start)."""
    if manifest is None:
        return 0, genesis(None)
    j = manifest.get("journal")
    if isinstance(j, dict) and isinstance(j.get("seq"), int) and isinstance(j.get("head"), str):
        return j["seq"], j["head"]
    return 0, genesis(manifest.get("study_id"))


def entry(manifest: dict[str, Any] | None, base: str | None, seq: int, prev: str, rel: str,
          kind: str, old: str | None, new: str | None, key: bytes | None) -> bytes:
    """One journal line (with its newline)."""
    from containmentbench.integrity.keys import mac

    e: dict[str, Any] = {"v": VERSION, "study": (manifest or {}).get("study_id"), "seq": seq,
                         "prev": prev, "base": base, "path": rel, "kind": kind, "old": old,
                         "new": new}
    if key is not None:
        e["mac"] = mac(key, "rebuilt", e)
    return (json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _legacy(e: dict[str, Any], base: str, key: bytes | None) -> bool:
    """A line written before the chain, counted as it was then (its manifest, its MAC)."""
    from containmentbench.integrity.keys import equal, mac

    if e.get("base") != base or not isinstance(e.get("path"), str):
        return False
    if key is not None:
        body = {k: v for k, v in e.items() if k != "mac"}
        return equal(e.get("mac", ""), mac(key, "rebuilt", body))
    return True


def follow(data: bytes, manifest: dict[str, Any] | None, base: str | None,
           key: bytes | None) -> Chain:
    """The chain of ``data`` (a journal's bytes) from ``manifest``'s anchor to the end.
    ``rebuilt``: path -> sha256 of its latest journalled output since the manifest (None:
    removed). The first line that does not continue the chain is a problem, and nothing
    after it is trusted."""
    from containmentbench.integrity.keys import equal, mac

    if not isinstance((manifest or {}).get("auth"), dict):
        key = None  # a study frozen without a key: its lines carry no claim to check
    seq, head = anchor(manifest)
    chain = Chain(seq, head)
    study = (manifest or {}).get("study_id")
    chained = manifest is not None and "study_id" in manifest
    broken = False
    for n, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            e = json.loads(raw)
        except (ValueError, RecursionError):
            continue  # a line a crash cut short (the writer starts a fresh line after it)
        if not isinstance(e, dict):
            continue
        if e.get("v") != VERSION:
            if not chained and not broken and base is not None and _legacy(e, base, key):
                chain.rebuilt[e["path"]] = e.get("new")
            continue
        s = e.get("seq")
        if isinstance(s, int) and not isinstance(s, bool):
            chain.top = max(chain.top, s)
        if broken or not isinstance(s, int) or s <= seq:
            continue  # after a break nothing counts; at or before the anchor: history
        why = None
        if e.get("study") != study:
            why = "belongs to another study (its study id differs)"
        elif s != chain.seq + 1 or e.get("prev") != chain.head:
            why = (f"does not continue the chain (line {chain.seq + 1} expected after "
                   f"{chain.head[:12]}; a line cut out, moved or reordered)")
        elif e.get("base") != base:
            why = "was written under another manifest"
        elif not isinstance(e.get("path"), str) or not isinstance(e.get("kind"), str):
            why = "is malformed"
        elif key is not None and not equal(
                e.get("mac", ""), mac(key, "rebuilt", {k: v for k, v in e.items()
                                                       if k != "mac"})):
            why = "fails authentication (edited, or written with another key)"
        if why is not None:
            chain.problems.append(f"{JOURNAL} line {n} {why}")
            broken = True
            continue
        chain.seq, chain.head = s, digest(raw)
        chain.seen[s] = chain.head
        chain.rebuilt[e["path"]] = e.get("new")
    return chain
