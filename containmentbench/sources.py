"""The source files a module stands on: its own file and the files of every module it
imports from the same top-level package, transitively.

Two keys hash code through this: a pipeline layer's code version (``pipeline/content.py``:
an edit that could change what metrics or analysis compute reruns them) and a defense's code
identity (``defense/identity.py``: an edit to a defense makes its shards stale). Imports are
found by a line scan, not a parse (parsing every file of a layer cost ~0.3 s at each
Snakemake start); it finds every import the syntax tree has (``tests/pipeline/test_keys.py``
checks each module of the package) and may find more (an import written in a string): a
digest over more files is only more cautious.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

_COMMENT = re.compile(rb"#[^\n]*")
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([^\n]*)", re.M)


@functools.lru_cache(maxsize=8)
def _from_pattern(package: str) -> re.Pattern[bytes]:
    return re.compile(rb"^[ \t]*from[ \t]+(" + re.escape(package.encode()) +
                      rb"(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)


@functools.lru_cache(maxsize=1024)
def imports_of(source: bytes, package: str) -> tuple[str, ...]:
    """Every module of ``package`` a file imports, function-local imports included
    (``from x import y`` may name a submodule ``x.y``: both are listed)."""
    text = _COMMENT.sub(b"", source)
    out = []
    for m in _from_pattern(package).finditer(text):
        module = m.group(1).decode()
        out.append(module)
        names = m.group(2).strip(b"()").replace(b"\\\n", b" ")
        out += [f"{module}.{n}" for n in _first_words(names) if n.isidentifier()]
    for m in _IMPORT.finditer(text):
        out += [n for n in _first_words(m.group(1)) if n.split(".")[0] == package]
    return tuple(out)


def _first_words(names: bytes) -> list[str]:
    """The name of each comma-separated item (``a as b`` -> ``a``)."""
    return [part.split()[0].decode() for part in names.split(b",") if part.split()]


def module_file(root: Path, module: str) -> Path | None:
    """The file of ``module`` (dotted, first part the package at ``root``), or None."""
    rel = Path(*module.split(".")[1:]) if "." in module else Path()
    for cand in (root / rel / "__init__.py", (root / rel).with_suffix(".py")):
        if cand.is_file():
            return cand
    return None


def closure(root: Path, package: str, modules: Iterable[str]) -> dict[str, bytes]:
    """``modules`` of ``package`` (its folder is ``root``) and their imports of the same
    package, transitively: path relative to ``root`` -> bytes."""
    seen: dict[str, bytes] = {}
    todo = list(modules)
    while todo:
        f = module_file(root, todo.pop())
        if f is None:
            continue
        rel = f.relative_to(root).as_posix()
        if rel in seen:
            continue
        seen[rel] = f.read_bytes()
        todo += imports_of(seen[rel], package)
    return seen


def digest(files: dict[str, bytes]) -> str:
    """sha256 over files in path order (name, length and bytes of each)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}\0{len(files[rel])}\0".encode())
        h.update(files[rel])
    return h.hexdigest()
