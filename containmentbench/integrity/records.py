"""The read side of the writer's ownership rules (``writer.py``): how a temporary sibling is
named and recognised as ours, and what a folder's ownership record (:data:`RECORD`) says --
which kind of output a folder is and which kind wrote each of its files. Nothing here writes;
every write, rename and delete stays in ``writer.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from pathlib import Path
from typing import Any

RECORD = ".containmentbench-out"
MARKER = RECORD  # the name earlier code used for the folder record
_TMP = re.compile(r"\.(?P<name>.+)\.cbtmp-(?P<token>[0-9a-f]{12})-(?P<tag>[0-9a-f]{8})")
# Folder kinds recognised without a record (written before records existed): only these
# names, nothing else, may be in such a folder.
_LEGACY: dict[str, frozenset[str]] = {
    "shard": frozenset({"rollouts.parquet", "events.parquet", "edges.parquet",
                        "timings.parquet", "SHA256SUMS", "SHARD.json"}),
    "reparse": frozenset({"reparse.parquet", "summary.json"}),
    "suite": frozenset({"MANIFEST.json", "security.jsonl", "memory_recovery.jsonl",
                        "active_tainted.jsonl", "clean.jsonl"}),
}


def _tag(name: str, token: str) -> str:
    return hashlib.sha256(f"containmentbench-tmp\0{name}\0{token}".encode()).hexdigest()[:8]


def tmp_path(out: Path) -> Path:
    """A fresh temporary sibling name for ``out``: a random part and a tag derived from it,
    so a leftover is recognisable as ours and nothing else is."""
    out = Path(out)
    token = secrets.token_hex(6)
    return out.parent / f".{out.name}.cbtmp-{token}-{_tag(out.name, token)}"


def is_our_tmp(p: Path, out_name: str | None = None) -> bool:
    m = _TMP.fullmatch(p.name)
    if not m or (out_name is not None and m["name"] != out_name):
        return False
    return m["tag"] == _tag(m["name"], m["token"])


def folder_entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name != RECORD)


def read_record(d: Path) -> dict[str, Any] | None:
    """A folder's record: ``{"kind": ..., "files": {name: kind}}`` (None: no record). The
    first records were one line of text, the folder's kind."""
    from containmentbench.errors import BenchError
    from containmentbench.integrity import safeopen

    path = Path(d) / RECORD
    if not path.exists() and not path.is_symlink():
        return None
    try:
        # never through a link, never a FIFO or a device (one line naming it: a record that
        # is one of those was put there, and nothing beside it is written)
        data = safeopen.read_bytes(path, limit=safeopen.LIMIT_RECORD, what="ownership record",
                                   follow=False)
    except BenchError as exc:
        if not path.exists() and not path.is_symlink():
            return None  # removed meanwhile
        raise BenchError(exc.detail, file=str(path), field="out") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"kind": None, "files": {}}
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            return {"kind": None, "files": {}}
        files = doc.get("files") if isinstance(doc, dict) else None
        return {"kind": doc.get("kind") if isinstance(doc, dict) else None,
                "files": files if isinstance(files, dict) else {}}
    return {"kind": text.strip() or None, "files": {}}


def kind_of(d: Path) -> str | None:
    """Which of our outputs a folder is (None: not one of ours)."""
    rec = read_record(Path(d))
    if rec is not None:
        return rec["kind"]
    try:
        names = {p.name for p in folder_entries(Path(d))}
    except OSError:
        return None
    for kind, allowed in _LEGACY.items():
        if names and names <= allowed:
            return kind
    return None


def all_ours(d: Path, kinds: tuple[str, ...]) -> bool:
    """Every entry of ``d`` is a file one of ``kinds`` wrote (an empty folder too)."""
    try:
        entries = folder_entries(d)
    except OSError:
        return False
    return all(p.is_file() and not p.is_symlink() and owner_of(p) in kinds for p in entries)


def owner_of(path: Path) -> str | None:
    """The kind of output that wrote ``path`` (its record, or its folder's kind)."""
    path = Path(path)
    rec = read_record(path.parent)
    if rec is not None and path.name in rec["files"]:
        return rec["files"][path.name]
    return kind_of(path.parent)


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)
