"""The primitives under the one write path (:mod:`containmentbench.integrity.writer`): the
atomic write of one file (a temporary sibling, fsync, rename), the folder records that say
who wrote what (updated under a lock on the folder), the folders this module creates, and
the old bytes of a frozen study's covered file moved aside with the change journalled.

Only :mod:`~containmentbench.integrity.writer` and :mod:`~containmentbench.integrity.folders`
import this module (``tests/integrity/test_write_path.py``); every other module writes
through the writer, whose rules these primitives carry out.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import frozen
from containmentbench.integrity.records import RECORD, all_ours, owner_of, read_record, tmp_path

#: temporaries (files and folders) this process created and may write into or remove
OURS: set[Path] = set()
#: a verb's ``--force`` for every write inside :func:`forcing`
FORCED = contextvars.ContextVar("containmentbench_force", default=False)
_replaced: dict[Path, Path] = {}  # frozen study root -> this process's .replaced-<n>/


def _write_record(d: Path, rec: dict[str, Any]) -> None:
    text = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n" if rec["files"] \
        else f"{rec['kind'] or 'folder'}\n"
    raw_write(Path(d) / RECORD, text.encode(), sync=False)


@contextlib.contextmanager
def _locked(d: Path) -> Iterator[None]:
    """An exclusive lock on a folder while its record is read and rewritten (concurrent
    jobs write into one folder); where the file system has no such lock, none."""
    import fcntl

    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def update_record(d: Path, kind: str | None = None, name: str | None = None,
                   file_kind: str | None = None, drop: str | None = None) -> None:
    with _locked(d):
        rec = read_record(d) or {"kind": None, "files": {}}
        new = {"kind": kind if kind is not None else rec["kind"], "files": dict(rec["files"])}
        if name is not None:
            new["files"][name] = file_kind
        if drop is not None:
            new["files"].pop(drop, None)
        if new != rec or not (Path(d) / RECORD).exists():
            _write_record(d, new)


def fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def raw_write(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a new temporary beside ``path`` and rename it over ``path``."""
    tmp = tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    OURS.add(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    finally:
        OURS.discard(tmp)


def record_file(path: Path, kind: str) -> None:
    rec = read_record(path.parent)
    if rec is not None and rec["files"].get(path.name) == kind:
        return
    update_record(path.parent, name=path.name, file_kind=kind)


def ensure_dir(d: Path, kind: str = "folder") -> Path:
    """Create ``d`` and missing parents; each folder created here carries a record. An
    existing folder we made as a plain parent (record ``folder``) takes ``kind``."""
    d = Path(d)
    if d.is_dir() and kind != "folder":
        # a plain parent we made, or a folder a workflow engine made for our outputs (every
        # entry ours): it takes the kind
        rec = read_record(d)
        held = rec["kind"] if rec is not None else None
        if held == "folder" or (held is None and (rec is not None or all_ours(d, (kind,)))):
            update_record(d, kind=kind)
        return d
    missing = []
    p = d
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise BenchError("the parent is not a folder", file=str(p), field="out")
    for q in reversed(missing):
        try:
            q.mkdir()
        except FileExistsError:
            continue  # made by a concurrent job meanwhile
        raw_write(q / RECORD, ((kind if q == d else "folder") + "\n").encode(), sync=False)
    return d


def adopt_legacy(d: Path, kind: str, owners: dict[str, str]) -> int:
    """Give a folder written before ownership records existed its record: the folder's kind
    and, for each file (path relative to ``d`` -> kind), who wrote it. Only a folder with no
    record at all is adopted, and the caller decides it is ours (the pipeline: a run folder
    whose ``config.yaml`` names this study and model). Returns the files recorded."""
    d = Path(d)
    if not d.is_dir() or read_record(d) is not None:
        return 0
    n = 0
    for rel, file_kind in sorted(owners.items()):
        p = d / rel
        if p.is_file() and not p.is_symlink() and owner_of(p) is None:
            update_record(p.parent, name=p.name, file_kind=file_kind)
            n += 1
    update_record(d, kind=kind)
    return n


@contextlib.contextmanager
def forcing(flag: bool) -> Iterator[None]:
    """Within the block, every write acts as if ``force`` were given when ``flag`` is true
    (a verb's ``--force`` reaches every file it writes without threading it through)."""
    token = FORCED.set(bool(flag) or FORCED.get())
    try:
        yield
    finally:
        FORCED.reset(token)


# ------------------------------------------------------------------ frozen studies
def move_to_replaced(root: Path, path: Path) -> Path:
    """Move the old bytes of a covered file to this process's ``.replaced-<n>/``."""
    base = _replaced.get(root)
    if base is None:
        n = 0
        while True:
            base = root / f".replaced-{n}"
            try:
                base.mkdir()
                break
            except FileExistsError:
                n += 1
        _replaced[root] = base
    rel = Path(os.path.abspath(path)).relative_to(root)  # ``root`` is absolute, ``path`` may not be
    (base / rel).parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, base / rel)
    return base / rel


def journal(root: Path, path: Path, kind: str, old: str | None, new: str | None) -> None:
    line = frozen.journal_entry(root, path, kind, old, new)
    jpath = root / frozen.JOURNAL
    with open(jpath, "ab") as fh:  # one short line: an atomic append under O_APPEND
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())
