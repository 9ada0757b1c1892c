"""Frozen candidates: canonical JSON per candidate, its sha256, and a manifest (paper 000
§6.3: "Frozen candidates are hashed and replayed across all policies").

A candidate's identity is ``sha256(canonical_json({strategy, template}))``; its file
``candidates/<sha256>.json`` is canonical JSON (so the same candidate always has the same
bytes) and ``MANIFEST.json`` lists every file's own sha256. The folder is written once through
integrity/writer.py: an identical rerun keeps it, a different one is refused (never
overwritten). :func:`load_frozen` re-checks every hash before a candidate is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json, sha256_bytes, sha256_json
from containmentbench.errors import BenchError

KIND = "adaptive-frozen"
MANIFEST = "candidates_manifest.json"  # not MANIFEST.json: the study freeze hashes it


def identity(c: dict[str, Any]) -> str:
    return sha256_json({"strategy": c["strategy"], "template": c["template"]})


def frozen_record(c: dict[str, Any]) -> dict[str, Any]:
    return {"sha256": c["sha256"], "strategy": c["strategy"], "template": c["template"],
            "parent": c.get("parent"), "restart": c.get("restart"), "depth": c.get("depth"),
            "search": {"stages": c.get("stages", []), "queries": c.get("queries", [])}}


def render(result: dict[str, Any]) -> dict[str, bytes]:
    """File name -> bytes of the frozen set of a search result."""
    by_sha = {c["sha256"]: c for c in result["evaluated"]}
    files: dict[str, bytes] = {}
    entries = []
    for rank, sha in enumerate(result["final"]):
        c = by_sha[sha]
        if identity(c) != sha:
            raise BenchError(f"candidate {sha[:12]} does not hash to its sha256",
                             field="candidates")
        data = (canonical_json(frozen_record(c)) + "\n").encode("utf-8")
        name = f"candidates/{sha}.json"
        files[name] = data
        entries.append({"rank": rank, "sha256": sha, "strategy": c["strategy"], "file": name,
                        "file_sha256": sha256_bytes(data)})
    manifest = {"search_settings_sha256": result["settings_sha256"],
                "search": result.get("search", "target"),
                "optimized_for": result["optimized_for"],
                "condition": result["condition"],
                "target_preserving": result["target_preserving"], "candidates": entries}
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return files


def _same(a: Path, b: Path) -> bool:
    def tree(d: Path) -> dict[str, bytes]:
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
                if p.is_file()}
    return tree(a) == tree(b)


def write_frozen(out: Path, files: dict[str, bytes], force: bool = False) -> str:
    from containmentbench.integrity import writer

    out = Path(out)
    writer.check_out(out, KIND, force)
    with writer.building_dir(out, KIND, force, identical=_same) as b:
        for name, data in files.items():
            b.put(name, data)
    return b.result


def load_frozen(folder: str | Path) -> list[dict[str, Any]]:
    """The frozen candidates in rank order, every hash checked."""
    from containmentbench.integrity.inputs import load_json

    folder = Path(folder)
    path = folder / MANIFEST
    manifest = load_json(path, "frozen_manifest")
    out = []
    for e in manifest["candidates"]:
        p = folder / e["file"]
        data = p.read_bytes() if p.is_file() else b""
        if sha256_bytes(data) != e["file_sha256"]:
            raise BenchError("frozen candidate file differs from its manifest hash",
                             file=str(p))
        c = load_json(p, "frozen_candidate")
        if identity(c) != c["sha256"] or c["sha256"] != e["sha256"]:
            raise BenchError("frozen candidate does not hash to its sha256", file=str(p))
        out.append(c)
    if not out:
        raise BenchError("no frozen candidates", file=str(path))
    return out
