"""Every reader checks what verify checks (issue 37, item 4).

``results.load`` never checked the manifest's MAC, even with the key set, so a re-hashed
forged table loaded; with ``"files": {}``, or with ``MANIFEST.json`` deleted while its copy
kept the study frozen, it checked nothing. Every reader of a frozen study (``results.load``,
``report``, ``report --serve``, every verb through :func:`trusted`) now asks
:func:`checked` for the manifest first:

* a study this machine's record (``integrity/heads.py``) or the manifest's copy
  (``.frozen-manifest.json``) says is frozen, with no ``MANIFEST.json``, is refused;
* the manifest must be one of ours with a non-empty list of files, each a sha256;
* with a key, its MAC must verify (a manifest written without a key is refused, with the
  command that keys it); a manifest older than the last freeze this machine saw of the study,
  or of another study, is refused.

Each refusal is one line naming the study (``BenchError``). Nothing here writes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import frozen, heads
from containmentbench.integrity.keys import ALG, check_record, equal, key_id, mac

_SHA = re.compile(r"[0-9a-f]{64}")
KEYED_SCHEMAS = ("containmentbench-manifest/2", "containmentbench-cross-model-manifest/2")
_ok: set[tuple[str, str, str | None]] = set()


def check_mac(key: bytes, manifest: dict[str, Any], what: str = frozen.MANIFEST) -> list[str]:
    """Every way the manifest's authentication fails with ``key`` (empty: it verifies)."""
    if manifest.get("schema") not in KEYED_SCHEMAS:  # schema 1: one MAC per entry
        meta = {k: v for k, v in manifest.items() if k not in ("files", "auth")}
        return check_record(key, manifest.get("auth"), meta, manifest["files"], what)
    auth = manifest.get("auth")
    if not isinstance(auth, dict):
        return [f"{what} carries no authentication block (written without a key; "
                f"containmentbench freeze <run directory> --key keys the study)"]
    if auth.get("alg") != ALG:
        return [f"{what}: unknown authentication algorithm {auth.get('alg')!r}"]
    if auth.get("key_id") != key_id(key):
        return [f"{what} was authenticated with another key (key id "
                f"{auth.get('key_id')!r})"]
    body = {k: v for k, v in manifest.items() if k != "auth"}
    if not equal(auth.get("mac", ""), mac(key, "manifest", body)):
        return [f"{what}: authentication failed (an entry, a field or the file list "
                f"differs from what was frozen)"]
    return []


def shape_problems(manifest: dict[str, Any]) -> list[str]:
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return [f"{frozen.MANIFEST} lists no files (a manifest covers every file of the study)"]
    for rel, digest in files.items():
        if not isinstance(digest, str) or not _SHA.fullmatch(digest):
            return [f"{frozen.MANIFEST}: entry '{rel}' is not a sha256"]
    return []


def head_problems(root: Path, manifest: dict[str, Any], sha: str, key: bytes) -> list[str]:
    """The manifest against the last freeze this machine saw of the study in ``root``."""
    rec, bad = heads.for_folder(root, key)
    out = [f"this machine's record {b}" for b in bad]
    if rec is None:
        return out
    if manifest.get("study_id") != rec.study_id:
        out.append(f"{frozen.MANIFEST} names study {manifest.get('study_id')!r}, but this "
                   f"folder held study {rec.study_id} (freeze {rec.freeze}, this machine's "
                   f"record): another study's manifest put in its place")
    elif not isinstance(manifest.get("freeze"), int) or manifest["freeze"] < rec.freeze \
            or (manifest["freeze"] == rec.freeze and sha != rec.doc["manifest_sha256"]):
        out.append(f"{frozen.MANIFEST} is freeze {manifest.get('freeze')}, older than freeze "
                   f"{rec.freeze} this machine last saw of the study (an older manifest "
                   f"restored)")
    return out


def problems(root: Path, manifest: dict[str, Any], sha: str, key: bytes | None) -> list[str]:
    out = shape_problems(manifest)
    if key is not None and not out:
        out += check_mac(key, manifest)
        if not out:
            out += head_problems(root, manifest, sha, key)
    return out


def recorded_root(path: Path, key: bytes | None) -> heads.Head | None:
    """With a key: the record of a frozen study ``path`` lies in whose folder holds no
    manifest (nor its copy) any more."""
    if key is None:
        return None
    from containmentbench.integrity.safeopen import resolved

    p = resolved(path)
    for d in [p, *p.parents][:8]:
        rec, _ = heads.for_folder(d, key)
        if rec is not None and frozen.manifest_of(d) is None:
            return rec
    return None


def refuse_unfrozen(path: Path) -> None:
    """``path`` lies in no folder with a manifest: refuse when this machine's record says
    its study is frozen (both manifests deleted)."""
    from containmentbench.integrity.keys import load_key

    rec = recorded_root(path, load_key())
    if rec is not None:
        raise BenchError(f"the study in {rec.doc['folder']} is frozen (freeze {rec.freeze}, "
                         f"this machine's record) but its {frozen.MANIFEST} and "
                         f"{frozen.HEAD} are gone; refusing to read it (restore the "
                         f"manifest; a freeze there continues from the record)",
                         file=str(path))


def checked(root: Path, key: bytes | None, require_manifest: bool = False
            ) -> tuple[dict[str, Any], str] | None:
    """The manifest of the study folder ``root`` once it passes every check above (None: the
    folder is not frozen). ``require_manifest``: a study kept frozen only by the manifest's
    copy (``MANIFEST.json`` deleted) is refused, as readers outside the pipeline do."""
    root = Path(root)
    man = frozen.manifest_of(root)
    if man is None:
        refuse_unfrozen(root)
        if (root / frozen.MANIFEST).exists() or (root / frozen.MANIFEST).is_symlink():
            raise BenchError(f"{frozen.MANIFEST} is not a manifest of ours (not JSON, a link, "
                             f"or not a regular file)", file=str(root / frozen.MANIFEST))
        return None
    present = (root / frozen.MANIFEST).is_file() and not (root / frozen.MANIFEST).is_symlink()
    if require_manifest and not present:
        raise BenchError(f"{frozen.MANIFEST} is missing but the study is frozen (freeze "
                         f"{man[0].get('freeze')}, kept in {frozen.HEAD}); refusing to read "
                         f"it (restore the manifest, or run freeze)", file=str(root))
    stamp = (str(root), man[1], key_id(key) if key is not None else None)
    if stamp not in _ok:
        bad = problems(root, man[0], man[1], key)
        if bad:
            raise BenchError(f"refusing the study: {bad[0]}"
                             + (f" ({len(bad)} problems)" if len(bad) > 1 else ""),
                             file=str(root / frozen.MANIFEST))
        _ok.add(stamp)
    return man


def trusted(path: Path) -> None:
    """Before a verb uses an intermediate file of a frozen study (``analysis/*.json``,
    ``audit/``, metrics): the manifest must verify (its MAC with a key) and the file's bytes
    must be the frozen ones or a verb's output on the study's chain."""
    from containmentbench.integrity.keys import load_key

    root = frozen.covering(path)
    if root is None:
        refuse_unfrozen(path)
        return
    key = load_key(root)
    man = checked(root, key)
    assert man is not None
    r = frozen.rel(root, path)
    now = frozen.digest(path)
    if man[0]["files"].get(r) == now:
        return
    ch = frozen.chain(root, man, key)
    if not ch.problems and ch.rebuilt.get(r, "missing") == now:
        return
    why = f" ({ch.problems[0]})" if ch.problems else ""
    raise BenchError(f"changed since the study was frozen and not rebuilt by a verb{why}; "
                     f"refusing to use it (containmentbench verify {root} lists what "
                     f"changed)", file=str(path))
