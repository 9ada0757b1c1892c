"""Paths are data: names and folders checked before they become part of a path or a command.

Rule shell commands quote every path (``{params.out:q}``); on top of that, a study name must
be one plain path component and ``results_dir`` must hold no ``..`` component and no shell
metacharacter, so ``study.name=../../x`` cannot put a study outside ``results/`` and
``results_dir='r;touch X;'`` is refused before any rule runs.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from containmentbench.errors import BenchError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
SHELL_META = set(";&|$`\\\"'<>(){}[]*?!#~\n\r\t\0")


def check_name(value: object, field: str) -> str:
    """One path component: letters, digits, ``_.+-``, not starting with a dot."""
    if not isinstance(value, str) or not NAME.fullmatch(value) or ".." in value:
        raise BenchError(f"{value!r} is not a plain name (letters, digits, '_', '.', '+', "
                         f"'-'; no '..', no '/', at most 128 characters)", field=field)
    return value


def check_dir(value: object, field: str) -> str:
    """A folder path without ``..`` components or shell metacharacters (spaces are fine:
    every rule quotes its paths)."""
    if not isinstance(value, str) or not value.strip():
        raise BenchError("must be a non-empty path", field=field)
    bad = sorted(set(value) & SHELL_META)
    if bad:
        raise BenchError(f"{value!r} holds the shell metacharacter {bad[0]!r}", field=field)
    if ".." in PurePosixPath(value).parts:
        raise BenchError(f"{value!r} holds a '..' component", field=field)
    return value


def inside(root: Path, rel: str, field: str, file: str | None = None) -> Path:
    """``root / rel`` for a relative path that stays below ``root`` (manifest entries);
    anything else is a one-line error and is never opened."""
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts or "\\" in rel or "\0" in rel:
        raise BenchError(f"path {rel!r} points outside the study", file=file, field=field)
    return root / p
