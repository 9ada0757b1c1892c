"""Writing a CIM store safely and checking it: ``cim export``/``cim generate`` ``--out`` and
``cim verify-chain`` (paper 002 App. C.1, tamper-evident telemetry).

A store is built in a hidden temporary sibling and put in place by
:func:`containmentbench.integrity.writer.commit_dir` (a folder that is not a store is never
touched; an earlier store is replaced only with ``--force`` and kept aside). With a key the
manifest's ``auth`` block authenticates its metadata and the list of events files with their
chain heads, and the chain links are HMACs (chain.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.cim.chain import ChainBreak, verify_chain
from containmentbench.cim.schema import CIM_VERSION
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.integrity.keys import ALG, check_record, key_id, sign_record

KIND = "cim-store"
# manifest fields that hold wall-clock measurements (never part of "identical")
_TIMING = ("seconds", "events_per_s")


def begin_store(out: Path, force: bool) -> Path:
    """Refuse a foreign --out before any work; return the empty temporary folder to fill."""
    return writer.begin_dir(out, KIND, force)


def _same_store(new: Path, old: Path) -> bool:
    def files(d: Path) -> dict[str, bytes]:
        out = {}
        for p in sorted(d.rglob("*")):
            if p.is_file() and not p.name.startswith("."):
                data = p.read_bytes()
                if p.name == "manifest.json":
                    m = json.loads(data)
                    for k in _TIMING:
                        m.pop(k, None)
                    m.pop("source", None)
                    data = json.dumps(m, sort_keys=True).encode()
                out[p.relative_to(d).as_posix()] = data
        return out
    try:
        return files(new) == files(old)
    except (OSError, ValueError):
        return False


def finish_store(tmp: Path, out: Path, force: bool) -> str:
    return writer.commit_dir(tmp, out, KIND, force, identical=_same_store)


def seal_manifest(manifest: dict[str, Any], files: list[str], key: bytes | None
                  ) -> dict[str, Any]:
    """Add the chain algorithm and, with a key, the ``auth`` block over the metadata and
    every events file with its chain head."""
    if not manifest.get("chain"):
        return manifest
    manifest = {"cim_version": CIM_VERSION, **manifest}  # as write_manifest will store it
    manifest["chain_alg"] = ALG if key is not None else "sha256"
    if key is not None:
        manifest["chain_key_id"] = key_id(key)
        heads = manifest.get("chain_heads") or {}
        meta = {k: v for k, v in manifest.items() if k not in ("chain_heads", "auth")}
        manifest["auth"] = sign_record(key, meta, {f: heads.get(f, "") for f in files})
    return manifest


def audit_store(root: Path, manifest: dict[str, Any], files: list[str], key: bytes | None
                ) -> list[str]:
    """Every problem, each named: broken rows, files added or removed, metadata changed."""
    if not manifest.get("chain"):
        raise BenchError("store was written without --chain (no hash chain to verify)",
                         file=str(root))
    heads = manifest.get("chain_heads")
    if not isinstance(heads, dict):
        raise BenchError("expected an object", file=str(root / "manifest.json"),
                         field="chain_heads")
    keyed = manifest.get("chain_alg") == ALG
    problems: list[str] = []
    if keyed and key is None:
        raise BenchError("the chain is keyed (HMAC); set CONTAINMENTBENCH_KEY or "
                         "CONTAINMENTBENCH_KEY_FILE to verify it", file=str(root))
    use_key = key if keyed else None
    if key is not None and not keyed:
        problems.append("the chain is not keyed (written without a key): edits with a "
                        "recomputed chain cannot be detected")
    for rel in sorted(set(heads) - set(files)):
        problems.append(f"{rel}: events file removed")
    for rel in sorted(set(files) - set(heads)):
        problems.append(f"{rel}: events file added (not in the manifest)")
    brks: list[ChainBreak] = verify_chain(root, [f for f in files if f in heads], heads,
                                          use_key)
    problems += [f"{b.file}: row {b.row} (event '{b.event_id}'): {b.reason}" for b in brks]
    if use_key is not None:
        meta = {k: v for k, v in manifest.items() if k not in ("chain_heads", "auth")}
        listed = {f: heads.get(f, "") for f in heads}
        problems += check_record(use_key, manifest.get("auth"), meta, listed, "manifest.json")
    return problems
