"""Keyed tamper evidence: HMAC-SHA256 (RFC 2104) with a key kept outside the study.

A plain sha256 chain or manifest only catches accidental corruption: whoever edits a row can
recompute every hash stored beside it. With a secret key, the study manifest and the CIM
chain carry MACs an editor cannot recompute (paper 002 App. C.1, "event signing"; paper 000
§6.6, frozen artifacts). The key comes from

* ``CONTAINMENTBENCH_KEY``: the key itself (at least 16 bytes of text), or
* ``CONTAINMENTBENCH_KEY_FILE``: a file holding it, which must not lie inside the study.

Every MAC is taken over a label and canonical JSON, so a MAC of one item can never be
replayed as the MAC of another (a file digest as a metadata field, say).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json
from containmentbench.errors import BenchError

ENV_KEY = "CONTAINMENTBENCH_KEY"
ENV_KEY_FILE = "CONTAINMENTBENCH_KEY_FILE"
ALG = "hmac-sha256"
NO_KEY_NOTE = (f"no key ({ENV_KEY} or {ENV_KEY_FILE}): only accidental corruption is "
               f"detected; a deliberate edit with recomputed hashes would pass (set "
               f"{ENV_KEY_FILE} to a file outside the study holding at least 16 bytes; "
               f"containmentbench freeze DIR --key keys a study frozen without one)")


def load_key(inside: Path | None = None) -> bytes | None:
    """The key, or None when neither variable is set; ``inside`` is a folder the key file
    must not be in (the study or store being protected)."""
    raw = os.environ.get(ENV_KEY)
    path = os.environ.get(ENV_KEY_FILE)
    if raw and path:
        raise BenchError(f"set only one of {ENV_KEY} and {ENV_KEY_FILE}", field=ENV_KEY)
    if path:
        p = Path(path).expanduser()
        if inside is not None:
            try:
                p.resolve().relative_to(Path(inside).resolve())
            except ValueError:
                pass
            else:
                raise BenchError("the key file lies inside the folder it protects; keep it "
                                 "outside", file=str(p), field=ENV_KEY_FILE)
        if not p.is_file():
            raise BenchError(f"key file not found (set {ENV_KEY_FILE} to a file holding the "
                             f"key)", file=str(p), field=ENV_KEY_FILE)
        from containmentbench.integrity import safeopen

        data = safeopen.read_bytes(p, limit=safeopen.KIB * 64, what="key file",
                                   field=ENV_KEY_FILE).strip()
    elif raw:
        data = raw.encode("utf-8")
    else:
        return None
    if len(data) < 16:
        raise BenchError("the key must be at least 16 bytes", field=ENV_KEY_FILE if path
                         else ENV_KEY)
    return data


def key_id(key: bytes) -> str:
    """A public name of the key (lets verify say "signed with another key")."""
    return hashlib.sha256(b"containmentbench-key-id\0" + key).hexdigest()[:16]


def mac(key: bytes, label: str, value: Any) -> str:
    msg = label.encode("utf-8") + b"\0" + canonical_json(value).encode("utf-8")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def mac_bytes(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def equal(a: str, b: str) -> bool:
    return isinstance(a, str) and isinstance(b, str) and hmac.compare_digest(a, b)


def sign_record(key: bytes, meta: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """The ``auth`` block: one MAC per metadata field, per file entry, and over the list of
    files, so verification names exactly what changed."""
    return {"alg": ALG, "key_id": key_id(key),
            "fields": {k: mac(key, f"field:{k}", v) for k, v in sorted(meta.items())},
            "files": {k: mac(key, f"file:{k}", v) for k, v in sorted(files.items())},
            "file_list": mac(key, "file-list", sorted(files))}


def check_record(key: bytes, auth: Any, meta: dict[str, Any], files: dict[str, str],
                 what: str) -> list[str]:
    """Every difference between ``meta``/``files`` and what ``auth`` authenticates."""
    if not isinstance(auth, dict):
        return [f"{what} carries no authentication block (written without a key)"]
    if auth.get("alg") != ALG:
        return [f"{what}: unknown authentication algorithm {auth.get('alg')!r}"]
    if auth.get("key_id") != key_id(key):
        return [f"{what} was authenticated with another key (key id {auth.get('key_id')!r})"]
    problems = []
    fields = auth.get("fields") if isinstance(auth.get("fields"), dict) else {}
    for k in sorted(set(fields) | set(meta)):
        if k not in meta:
            problems.append(f"metadata field '{k}' removed")
        elif k not in fields:
            problems.append(f"metadata field '{k}' added")
        elif not equal(fields[k], mac(key, f"field:{k}", meta[k])):
            problems.append(f"metadata field '{k}' changed")
    macs = auth.get("files") if isinstance(auth.get("files"), dict) else {}
    list_ok = equal(auth.get("file_list", ""), mac(key, "file-list", sorted(files)))
    for k in sorted(set(macs) | set(files)):
        if k not in files:
            problems.append(f"file '{k}' removed from the authenticated list")
        elif k not in macs:
            problems.append(f"file '{k}' added to the list (not authenticated)")
        elif not equal(macs[k], mac(key, f"file:{k}", files[k])):
            problems.append(f"file '{k}': recorded hash changed")
    if not list_ok and not any("file '" in p for p in problems):
        problems.append("the authenticated file list changed (entries added or removed)")
    return problems
