"""A defense's identity: its configuration and its code.

A shard key that hashed only a defense's configuration and ``method_version`` let a defense
under development be measured as its previous version (an edit left every shard ``done``).
The identity here covers the code, so an edit makes exactly that defense's shards stale:

* a defense in a module: the module's file and every module of the same top-level package
  it imports, transitively (``containmentbench/sources.py``'s scan); for a distribution
  installed from an index, also its name, version and the file hashes its ``RECORD`` lists;
* a defense in a file: the file and every file of its folder it imports, transitively.

The project's own defenses are modules of ``containmentbench`` like any other: their
identity is their module and the defense API they import.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.defense.api import DefenseError
from containmentbench.defense.registry import Registered, resolve, split_stack
from containmentbench.integrity.safeopen import read_bytes
from containmentbench.sources import closure, digest

_TOP = re.compile(rb"^[ \t]*(?:from|import)[ \t]+([A-Za-z_]\w*)", re.M)


def _module_sources(module: str, where: str) -> dict[str, bytes]:
    """A module's file and its imports from the same top-level package (a package), or
    the file and the files of its folder it imports (a top-level module file)."""
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        raise DefenseError(f"{where}: cannot find module '{top}': {exc}") from None
    if spec is None:
        raise DefenseError(f"{where}: cannot find module '{top}'")
    if spec.submodule_search_locations:
        return closure(Path(next(iter(spec.submodule_search_locations))), top, [module])
    if spec.origin and spec.origin.endswith(".py"):
        return _folder_closure(Path(spec.origin))
    raise DefenseError(f"{where}: module '{top}' has no Python source")


def _folder_closure(path: Path) -> dict[str, bytes]:
    """A file and every file or package of its folder it imports, transitively."""
    folder = path.parent
    seen: dict[str, bytes] = {}
    todo = [path]
    while todo:
        f = todo.pop()
        rel = f.relative_to(folder).as_posix()
        if rel in seen:
            continue
        # a user's file: a FIFO or a device in its place is refused, never read
        seen[rel] = src = read_bytes(f, limit=16 << 20, what="defense source file")
        for m in _TOP.finditer(src):
            name = m.group(1).decode()
            if (folder / f"{name}.py").is_file():
                todo.append(folder / f"{name}.py")
            elif (folder / name / "__init__.py").is_file():
                mods = [name, *(x for x in _dotted(src, name))]
                for k, v in closure(folder / name, name, mods).items():
                    seen[f"{name}/{k}"] = v
    return seen


def _dotted(src: bytes, package: str) -> list[str]:
    from containmentbench.sources import imports_of

    return list(imports_of(src, package))


def _record_hashes(dist: str) -> list[list[str]]:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        files = distribution(dist).files or []
    except PackageNotFoundError:
        return []
    return sorted([str(f), f.hash.value] for f in files if f.hash is not None)


@functools.lru_cache(maxsize=256)
def _code(target: str, origin: str, dist: str | None, version: str | None,
          where: str) -> dict[str, Any]:
    path, _, _cls = target.rpartition(":")
    if origin == "file":
        p = Path(path)
        if not p.is_file():
            raise DefenseError(f"{where}: defense file '{p}' not found")
        files = _folder_closure(p)
    else:
        files = _module_sources(path, where)
    out: dict[str, Any] = {"target": target, "sources": digest(files),
                           "files": sorted(files)}
    if origin == "entry point" and dist:
        out.update(dist=dist, version=version, record=_record_hashes(dist))
    return out


def code_identity(key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """What decides one configured defense's code: target, source digest and (for an
    installed distribution) its name, version and file hashes."""
    reg: Registered = resolve(key, entry)
    return _code(reg.target, reg.origin, reg.dist, reg.version, f"defense '{key}'")


def clear() -> None:
    """Forget cached identities (a long-lived process that edits defenses)."""
    _code.cache_clear()


def defense_identity(label: str, defenses: Mapping[str, Any]) -> dict[str, Any]:
    """The identity of a study's defense (one or a stack): per layer, its configuration
    and the digest of its code identity. This is what a shard key hashes."""
    layers = []
    for part in split_stack(label):
        entry = defenses[part]
        code = code_identity(part, entry)
        layers.append({"key": part, "config": dict(entry),
                       "code": sha256_json({k: v for k, v in code.items() if k != "files"})})
    return {"layers": layers}


def code_digest(label: str, defenses: Mapping[str, Any]) -> str:
    """One digest of the code of every layer of ``label`` (recorded with each rollout)."""
    return sha256_json([lay["code"] for lay in defense_identity(label, defenses)["layers"]])
