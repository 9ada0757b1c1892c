"""Frozen studies: what a ``MANIFEST.json`` covers, and the journal of rebuilt outputs.

A study folder with a manifest is frozen (paper 000 §6.6: frozen, hashed tables). Every file
under the covered folders, plus ``analysis.json`` and ``config.yaml``, is immutable: the
writer (:mod:`containmentbench.integrity.writer`) changes one only with ``force``, moving the
old bytes to ``.replaced-<n>/`` and appending a line to the study's journal
(:data:`JOURNAL`): the manifest it was frozen under, the path, the old and new sha256, the
kind of output that wrote it, and (with a key) a MAC.

``freeze`` re-freezes only bytes it can account for: every covered file whose hash differs
from the old manifest must be the latest journalled output of a verb since that manifest
(:func:`unaccounted`); an edited table, an edited ``analysis/bootstrap.json`` or a file
dropped into ``audit/`` is refused. Verbs that read an intermediate cache of a frozen study
call :func:`trusted` first, so an edited cache never reaches a table.

This module only reads; the writer is the one that writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

MANIFEST = "MANIFEST.json"
#: a copy of the last manifest freeze wrote: the study stays frozen while a workflow has
#: deleted MANIFEST.json to rebuild it (Snakemake removes a job's outputs before it runs),
#: and a deleted manifest does not let a re-freeze bless edited files
HEAD = ".frozen-manifest.json"
JOURNAL = ".rebuilt.jsonl"
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
    """sha256 of a file's bytes (None: no such file)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return h.hexdigest()


def manifest_of(root: Path) -> tuple[dict[str, Any], str] | None:
    """The parsed manifest of ``root`` (or, while it is missing, the copy freeze kept) and
    the sha256 of its bytes (None: not frozen, or not a manifest of ours). Cached per file
    version."""
    path = Path(root) / MANIFEST
    try:
        st = path.stat()
    except OSError:
        path = Path(root) / HEAD
        try:
            st = path.stat()
        except OSError:
            return None
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _cache.get(path)
    if hit is not None and hit[0] == stamp:
        return (hit[1], hit[2]) if hit[1] is not None else None
    try:
        data = path.read_bytes()
        doc = json.loads(data)
    except (OSError, ValueError, RecursionError):
        doc = None
    if not (isinstance(doc, dict) and doc.get("schema") in SCHEMAS
            and isinstance(doc.get("files"), dict)):
        doc = None
    sha = hashlib.sha256(data).hexdigest() if doc is not None else ""
    _cache[path] = (stamp, doc, sha)
    return (doc, sha) if doc is not None else None


def root_of(path: Path) -> Path | None:
    """The frozen study folder ``path`` lies in (the nearest parent with our manifest)."""
    p = Path(os.path.abspath(path))
    for d in [p, *p.parents][:_MAX_UP]:
        if ((d / MANIFEST).is_file() or (d / HEAD).is_file()) and manifest_of(d) is not None:
            return d
    return None


def _rel(root: Path, path: Path) -> str:
    return Path(os.path.abspath(path)).relative_to(root).as_posix()


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
    rel = _rel(root, path)
    if rel == MANIFEST:
        return None  # freeze owns the manifest and checks it itself
    man = manifest_of(root)
    return root if man is not None and is_covered_rel(rel, man[0]["files"]) else None


def guard(path: Path, force: bool) -> None:
    """Refuse to change a covered file of a frozen study unless ``force``."""
    root = covering(path)
    if root is not None and not force:
        raise BenchError(f"the study {root} is frozen and its {MANIFEST} covers "
                         f"'{_rel(root, path)}'; nothing was changed (--force redoes it and "
                         f"keeps the old bytes under .replaced-<n>/; then re-freeze)",
                         file=str(path), field="out")


def listed_under(root: Path, folder: Path) -> dict[str, str]:
    """The manifest's entries below ``folder`` (paths relative to the folder -> sha256)."""
    man = manifest_of(root)
    if man is None:
        return {}
    prefix = _rel(root, folder) + "/"
    return {rel[len(prefix):]: digest for rel, digest in man[0]["files"].items()
            if rel.startswith(prefix)}


def journal_entry(root: Path, path: Path, kind: str, old: str | None, new: str | None) -> bytes:
    from containmentbench.integrity.keys import load_key, mac

    man = manifest_of(root)
    entry = {"base": man[1] if man else None, "path": _rel(root, path), "kind": kind,
             "old": old, "new": new}
    key = load_key(root)
    if key is not None:
        entry["mac"] = mac(key, "rebuilt", entry)
    return (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()


def rebuilt(root: Path, base: str) -> dict[str, str | None]:
    """Path -> sha256 of its latest journalled output since the manifest ``base`` (None:
    removed by a verb). With a key, entries without a valid MAC are ignored."""
    from containmentbench.integrity.keys import equal, load_key, mac

    key = load_key(root)
    out: dict[str, str | None] = {}
    try:
        lines = (Path(root) / JOURNAL).read_bytes().splitlines()
    except OSError:
        return out
    for raw in lines:
        try:
            e = json.loads(raw)
        except ValueError:
            continue  # a line cut by a crash
        if not isinstance(e, dict) or e.get("base") != base or not isinstance(e.get("path"), str):
            continue
        if key is not None:
            body = {k: v for k, v in e.items() if k != "mac"}
            if not equal(e.get("mac", ""), mac(key, "rebuilt", body)):
                continue
        out[e["path"]] = e.get("new")
    return out


def unaccounted(root: Path, current: dict[str, str]) -> list[str]:
    """Covered files whose bytes differ from the frozen manifest and are not the latest
    output of a verb since it (``current``: path -> sha256 now)."""
    man = manifest_of(root)
    if man is None:
        return []
    files, base = man[0]["files"], man[1]
    done = rebuilt(root, base)
    out = []
    for rel in sorted(set(files) | set(current)):
        now = current.get(rel)
        if files.get(rel) == now or (rel in done and done[rel] == now):
            continue
        if rel not in files and not is_covered_rel(rel):
            continue
        what = ("removed" if now is None else "added" if rel not in files else "changed")
        out.append(f"{rel}: {what} since the last freeze and not rebuilt by a verb")
    return out


def trusted(path: Path) -> None:
    """Before a verb uses an intermediate file of a frozen study (``analysis/*.json``,
    ``audit/``, metrics): its bytes must be the frozen ones or a verb's rebuilt output."""
    root = covering(path)
    if root is None:
        return
    man = manifest_of(root)
    assert man is not None
    rel = _rel(root, path)
    now = digest(path)
    if man[0]["files"].get(rel) == now:
        return
    if rebuilt(root, man[1]).get(rel, "missing") == now:
        return
    raise BenchError(f"changed since the study was frozen and not rebuilt by a verb; "
                     f"refusing to use it (containmentbench verify {root} lists what "
                     f"changed)", file=str(path))
