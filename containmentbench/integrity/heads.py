"""The last freeze this machine saw of each keyed study, kept outside the study (issue 37,
item 2).

Removing ``MANIFEST.json`` and ``.frozen-manifest.json`` used to unfreeze a keyed study: the
next freeze signed a hand-edited table with the counter back at 1. Update frameworks keep
the last version they saw of each repository's metadata on the client, so a deletion or a
rollback on the server is seen; the same here. Every keyed freeze writes, under the user's
state folder, one record per study identity and folder:

* ``heads/<study_id>-<folder digest>.json``: the study id, the folder (resolved), the freeze
  counter, the sha256 of the manifest, the journal's last line this machine appended
  (``seq``, digest; moved on by every journalled change), the digest of the traces the
  manifest lists, and an HMAC over all of it with the study's key;
* ``heads/<study_id>-<folder digest>.manifest.json``: a copy of that manifest.

Where the record says a folder holds a frozen study, a freeze there continues that identity
and counter from the record (and accounts for every change against it) whatever was deleted
in the folder; a manifest older than the record (a rollback) or of another identity, and a
journal cut back below the record's line, are refused; a folder whose traces are those of a
study whose own folder no longer holds it is never frozen from scratch without
``freeze --new-identity``.

The folder: ``CONTAINMENTBENCH_STATE_DIR``, else ``$XDG_STATE_HOME/containmentbench``, else
``~/.local/state/containmentbench``. Only keyed studies have records (without a key nothing
is authenticated, in the study or here). This module only reads; the writer writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import safeopen

ENV_STATE = "CONTAINMENTBENCH_STATE_DIR"
SCHEMA = "containmentbench-head/1"


def state_dir() -> Path:
    if os.environ.get(ENV_STATE):
        return Path(os.environ[ENV_STATE]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "containmentbench"


def heads_dir() -> Path:
    return state_dir() / "heads"


def folder_digest(root: Path) -> str:
    return hashlib.sha256(str(safeopen.resolved(root)).encode()).hexdigest()[:16]


def record_path(study_id: str, root: Path) -> Path:
    return heads_dir() / f"{study_id}-{folder_digest(root)}.json"


def copy_path(record: Path) -> Path:
    return record.with_name(record.name[: -len(".json")] + ".manifest.json")


def traces_digest(files: dict[str, str]) -> str:
    """The digest of the traces a manifest lists (path -> sha256 under ``traces/``)."""
    from containmentbench.canonical import sha256_json

    return sha256_json(sorted((k, v) for k, v in files.items() if k.startswith("traces/")))


@dataclass
class Head:
    """One record (see the module text) and the file it came from."""

    path: Path
    doc: dict[str, Any]

    @property
    def study_id(self) -> str:
        return self.doc["study_id"]

    @property
    def freeze(self) -> int:
        return self.doc["freeze"]

    @property
    def journal(self) -> tuple[int, str]:
        return self.doc["journal"]["seq"], self.doc["journal"]["head"]

    def manifest(self) -> tuple[dict[str, Any], str, bytes] | None:
        """The copy of the manifest the record names (None: missing or not that one)."""
        try:
            data = safeopen.read_bytes(copy_path(self.path), limit=safeopen.LIMIT_JSON,
                                       what="manifest copy", follow=False)
        except BenchError:
            return None
        sha = hashlib.sha256(data).hexdigest()
        if sha != self.doc["manifest_sha256"]:
            return None
        try:
            return json.loads(data), sha, data
        except ValueError:
            return None


def body(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "mac"}


def make(study_id: str, root: Path, freeze: int, manifest_sha: str, seq: int, head: str,
         traces: str, key: bytes) -> dict[str, Any]:
    from containmentbench.integrity.keys import mac

    rec: dict[str, Any] = {"schema": SCHEMA, "study_id": study_id,
                           "folder": str(safeopen.resolved(root)), "freeze": freeze,
                           "manifest_sha256": manifest_sha,
                           "journal": {"seq": seq, "head": head}, "traces": traces}
    rec["mac"] = mac(key, "head", rec)
    return rec


def load(p: Path, key: bytes) -> Head | str:
    from containmentbench.integrity.keys import equal, mac

    try:
        doc = json.loads(safeopen.read_bytes(p, limit=safeopen.LIMIT_RECORD, what="head record",
                                             follow=False))
    except BenchError as exc:
        return f"{p}: unreadable ({exc.detail})"
    except (ValueError, RecursionError):
        return f"{p}: not JSON"
    ok = isinstance(doc, dict) and doc.get("schema") == SCHEMA and \
        isinstance(doc.get("freeze"), int) and isinstance(doc.get("journal"), dict) and \
        isinstance(doc["journal"].get("seq"), int) and isinstance(doc.get("study_id"), str)
    if not ok:
        return f"{p}: not a head record"
    if not equal(doc.get("mac", ""), mac(key, "head", body(doc))):
        return f"{p}: fails authentication (edited, or written with another key)"
    return Head(p, doc)


def for_folder(root: Path, key: bytes) -> tuple[Head | None, list[str]]:
    """The record of the study this machine last froze in ``root`` (None: none) and the
    records of that folder that could not be read or authenticated."""
    d = heads_dir()
    if not d.is_dir():
        return None, []
    found, bad = [], []
    for p in sorted(d.glob(f"*-{folder_digest(root)}.json")):
        if p.name.endswith(".manifest.json"):
            continue
        h = load(p, key)
        (bad if isinstance(h, str) else found).append(h)
    if not found:
        return None, bad
    return max(found, key=lambda h: h.freeze), bad


def by_traces(traces: str, key: bytes) -> list[Head]:
    """Every record (of any folder) whose manifest listed exactly these traces."""
    d = heads_dir()
    if not d.is_dir():
        return []
    out = []
    for p in sorted(d.glob("*.json")):
        if p.name.endswith(".manifest.json"):
            continue
        h = load(p, key)
        if isinstance(h, Head) and h.doc.get("traces") == traces:
            out.append(h)
    return out
