"""Frozen studies: what a ``MANIFEST.json`` covers, and the journal of rebuilt outputs.

A study folder with a manifest is frozen (paper 000 §6.6: frozen, hashed tables). Every file
under the covered folders, plus ``analysis.json`` and ``config.yaml``, is immutable: the
writer (:mod:`containmentbench.integrity.writer`) changes one only with ``force``, moving the
old bytes to ``.replaced-<n>/`` and appending a line to the study's journal
(:data:`JOURNAL`): the manifest it was frozen under, the path, the old and new sha256, the
kind of output that wrote it, and (with a key) a MAC.

The journal is one chain per study (``integrity/journal.py``): every line is bound to the
study's identity (``study_id``, random, fixed at its first freeze) and to the previous line,
so lines cannot be cut out, reordered or moved between studies. ``freeze`` re-freezes only
bytes it can account for: every covered file whose hash differs from the old manifest must
be the latest output of a verb on that chain since the manifest (:func:`unaccounted`); an
edited table, an edited ``analysis/bootstrap.json`` or a file dropped into ``audit/`` is
refused. Verbs that read an intermediate cache of a frozen study call
``integrity/reading.trusted`` first, so an edited cache never reaches a table.

Every path is resolved (its folder's symbolic links) before it is compared with a study
folder, and the study's own files (manifest, its copy, the journal) are read through
``integrity/safeopen.py``: never through a symbolic link, never a FIFO or a device.

This module only reads; the writer is the one that writes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import journal, safeopen

MANIFEST = "MANIFEST.json"
#: a copy of the last manifest freeze wrote: the study stays frozen while a workflow has
#: deleted MANIFEST.json to rebuild it (Snakemake removes a job's outputs before it runs),
#: and a deleted manifest does not let a re-freeze bless edited files
HEAD = ".frozen-manifest.json"
JOURNAL = journal.JOURNAL
SCHEMAS = ("containmentbench-manifest/1", "containmentbench-manifest/2",
           "containmentbench-cross-model-manifest/1", "containmentbench-cross-model-manifest/2")
#: the folders and files of a study a manifest covers (every file below them is hashed)
COVERED_DIRS = ("tables", "figures", "metrics", "reparse", "traces", "report", "audit",
                "analysis", "qualification", "adapter", "adaptive")
COVERED_FILES = ("analysis.json", "config.yaml")
#: what a study folder holds that no manifest covers, and why (coverage by rule: a new
#: top-level entry must be added to one of the three lists; tests/pipeline checks a study)
NOT_COVERED = {
    "MANIFEST.json": "the manifest itself",
    "logs": "wall-clock logs of each step",
    "jobs": "Snakemake's job markers (state of the workflow, re-derived from the shards)",
    "scenarios": "the suite check's record with its wall-clock seconds (the suite files are "
                 "pinned by scenario_manifests)",
    "quarantine": "damaged shards and outputs kept aside, never data of the study",
    "retired": "shards the study no longer plans, kept aside (pipeline/preflight.py)",
    "plan.json": "the job start-up cache, derived from config.yaml",
}
_MAX_UP = 8
_cache: dict[Path, tuple[tuple[int, int], dict[str, Any] | None, str]] = {}


def digest(path: Path) -> str | None:
    """sha256 of a file's bytes (None: no such file), read the safe way: a link, a FIFO or
    a device in a study's place is a one-line error, never followed or waited on."""
    import os

    if not Path(path).exists() and not Path(path).is_symlink():
        return None
    h = hashlib.sha256()
    fd, _ = safeopen.open_regular(path, what="covered file", follow=False)
    try:
        while block := os.read(fd, 1 << 20):
            h.update(block)
    finally:
        os.close(fd)
    return h.hexdigest()


def read_manifest_bytes(path: Path) -> bytes | None:
    """A manifest's bytes, read the safe way (None: absent, a link, not a regular file)."""
    try:
        return safeopen.read_bytes(path, limit=safeopen.LIMIT_JSON, what="manifest",
                                   follow=False)
    except BenchError:
        return None


def parse_manifest(data: bytes) -> dict[str, Any] | None:
    """The manifest in ``data`` when it is one of ours (None: not JSON, not ours)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(doc, dict) and doc.get("schema") in SCHEMAS
            and isinstance(doc.get("files"), dict)):
        return None
    return doc


def manifest_of(root: Path) -> tuple[dict[str, Any], str] | None:
    """The parsed manifest of ``root`` (or, while it is missing, the copy freeze kept) and
    the sha256 of its bytes (None: not frozen, or not a manifest of ours). Cached per file
    version."""
    for name in (MANIFEST, HEAD):
        path = Path(root) / name
        try:
            st = path.lstat()
        except OSError:
            continue
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        hit = _cache.get(path)
        if hit is not None and hit[0] == stamp:
            if hit[1] is not None:
                return hit[1], hit[2]
            continue
        data = read_manifest_bytes(path)
        doc = parse_manifest(data) if data is not None else None
        sha = hashlib.sha256(data).hexdigest() if doc is not None and data is not None else ""
        _cache[path] = (stamp, doc, sha)
        if doc is not None:
            return doc, sha
    return None


def root_of(path: Path) -> Path | None:
    """The frozen study folder ``path`` lies in (the nearest parent with our manifest),
    symbolic links of its folders resolved."""
    p = safeopen.resolved(path)
    for d in [p, *p.parents][:_MAX_UP]:
        if ((d / MANIFEST).exists() or (d / HEAD).exists()) and manifest_of(d) is not None:
            return d
    return None


def rel(root: Path, path: Path) -> str:
    """``path`` relative to the (resolved) study folder ``root``."""
    return safeopen.resolved(path).relative_to(root).as_posix()


def is_covered_rel(rel: str, files: dict[str, Any] | None = None) -> bool:
    parts = rel.split("/")
    if not rel or rel == "." or any(p.startswith(".") for p in parts):
        return False  # hidden: temporaries, records, .replaced-<n>/, the journal
    if files is not None and rel in files:
        return True
    return parts[0] in COVERED_DIRS or rel in COVERED_FILES


def covering(path: Path) -> Path | None:
    """The root of the frozen study whose manifest covers ``path`` (None: not covered)."""
    root = root_of(path)
    if root is None:
        return None
    r = rel(root, path)
    if r == MANIFEST:
        return None  # freeze owns the manifest and checks it itself
    man = manifest_of(root)
    return root if man is not None and is_covered_rel(r, man[0]["files"]) else None


def guard(path: Path, force: bool) -> None:
    """Refuse to change a covered file of a frozen study unless ``force``."""
    root = covering(path)
    if root is not None and not force:
        raise BenchError(f"the study {root} is frozen and its {MANIFEST} covers "
                         f"'{rel(root, path)}'; nothing was changed (--force redoes it and "
                         f"keeps the old bytes under .replaced-<n>/; then re-freeze)",
                         file=str(path), field="out")


def listed_under(root: Path, folder: Path) -> dict[str, str]:
    """The manifest's entries below ``folder`` (paths relative to the folder -> sha256)."""
    man = manifest_of(root)
    if man is None:
        return {}
    prefix = rel(root, folder) + "/"
    return {r[len(prefix):]: digest for r, digest in man[0]["files"].items()
            if r.startswith(prefix)}


def read_journal(root: Path) -> bytes:
    """The journal's bytes (empty: none yet); a link, a FIFO or a device in its place is a
    one-line error naming it."""
    path = Path(root) / JOURNAL
    if not path.exists() and not path.is_symlink():
        return b""
    return safeopen.read_bytes(path, limit=journal.LIMIT, what="journal", follow=False)


def chain(root: Path, manifest: tuple[dict[str, Any], str] | None = None,
          key: bytes | None = None) -> journal.Chain:
    """The study's journal followed from its manifest (``manifest``, else the folder's own)
    to the end; with a key every line must carry a valid MAC."""
    man = manifest if manifest is not None else manifest_of(root)
    return journal.follow(read_journal(root), man[0] if man else None, man[1] if man else None,
                          key)


def unaccounted(root: Path, current: dict[str, str],
                manifest: tuple[dict[str, Any], str] | None = None,
                key: bytes | None = None) -> list[str]:
    """Covered files whose bytes differ from the frozen manifest and are not the latest
    output of a verb on the study's chain since it (``current``: path -> sha256 now), and
    every break of that chain."""
    man = manifest if manifest is not None else manifest_of(root)
    if man is None:
        return []
    files = man[0]["files"]
    try:
        ch = chain(root, man, key)
    except BenchError as exc:
        return [exc.render()]
    done = ch.rebuilt
    out = list(ch.problems)
    for r in sorted(set(files) | set(current)):
        now = current.get(r)
        if files.get(r) == now or (r in done and done[r] == now):
            continue
        if r not in files and not is_covered_rel(r):
            continue
        what = ("removed" if now is None else "added" if r not in files else "changed")
        out.append(f"{r}: {what} since the last freeze and not rebuilt by a verb")
    return out
