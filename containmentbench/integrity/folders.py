"""Folder outputs of the one write path (:mod:`containmentbench.integrity.writer`, which
re-exports every name here): a folder is checked before any work (:func:`check_out`), built
whole in a temporary sibling that carries our record (:func:`begin_dir`,
:func:`building_dir` and the ``build_*`` writes inside it) and put in place at once
(:func:`commit_dir`: a rename, or an atomic exchange with the earlier output, which is moved
aside, never deleted; in a frozen study the change is journalled). What a killed run left is
cleaned only when it carries our name tag and record (:func:`clean_leftovers`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import frozen
from containmentbench.integrity.atomic import (
    FORCED,
    OURS,
    Journal,
    ensure_dir,
    fsync_dir,
    lock_for,
    move_to_replaced,
    open_journal,
    raw_write,
)
from containmentbench.integrity.records import (
    RECORD,
    all_ours,
    folder_entries,
    glob_escape,
    is_our_tmp,
    kind_of,
    read_record,
    tmp_path,
)

_RENAME_EXCHANGE = 2


def check_out(out: Path, kind: str, force: bool = False, accept: tuple[str, ...] = ()) -> str:
    """``"new"`` (missing or empty) or ``"own"`` (our earlier output of this kind, or of a kind
    in ``accept``); otherwise a one-line error. Called before any work."""
    out = Path(out)
    force = force or FORCED.get()
    lock_for(out)  # the study it goes into, before any check or work
    if not out.exists() and not out.is_symlink():
        frozen.guard(out, force)
        return "new"
    if out.is_symlink() or not out.is_dir():
        raise BenchError(f"exists and is not a folder; refusing to replace it (--out must name "
                         f"a new or empty folder, or an earlier {kind} output)", file=str(out),
                         field="out")
    try:
        entries = folder_entries(out)
    except OSError as exc:
        raise BenchError(f"cannot list the folder ({exc.strerror})", file=str(out),
                         field="out") from None
    read_record(out)  # a record that is a link, a FIFO or a device: one line, here
    if entries and kind_of(out) not in (kind, *accept) and \
            not (kind_of(out) is None and all_ours(out, (kind, *accept))):
        raise BenchError(f"refusing to write into a non-empty folder that is not a {kind} "
                         f"output (it holds '{entries[0].name}'); nothing was changed, --force "
                         f"or not: choose a new or empty folder", file=str(out), field="out")
    frozen.guard(out, force)
    return "own" if entries else "new"


def aside_path(out: Path) -> Path:
    n = 0
    while (cand := out.parent / f".{out.name}.replaced-{n}").exists():
        n += 1
    return cand


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False when the kernel cannot."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0


def clean_leftovers(out: Path, complete: Callable[[Path], bool] | None = None) -> list[Path]:
    """What a killed run of this output left: a temporary folder of ours (our name tag and
    our record inside) that is incomplete is removed; a complete one is moved aside and
    kept. Nothing else beside ``out`` is touched. Returns what was kept."""
    kept: list[Path] = []
    out = Path(out)
    if not out.parent.is_dir():
        return kept
    for left in sorted(out.parent.glob(f".{glob_escape(out.name)}.cbtmp-*")):
        if not is_our_tmp(left, out.name) or left in OURS or left.is_symlink():
            continue
        if left.is_dir() and (left / RECORD).is_file():
            if complete is not None and complete(left):
                target = aside_path(out)
                os.replace(left, target)
                kept.append(target)
            else:
                shutil.rmtree(left, ignore_errors=True)
    return kept


def _check_inside_ours(path: Path) -> Path:
    path = Path(path)
    for t in OURS:
        if path == t or t in path.parents:
            return path
    raise BenchError("internal: a build write outside this process's temporary folders",
                     file=str(path))


def build_bytes(path: Path, data: bytes) -> Path:
    """Write a file inside a folder output under construction (:func:`begin_dir`)."""
    path = _check_inside_ours(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    return path


@contextlib.contextmanager
def build_open(path: Path) -> Iterator[Any]:
    """A binary file handle for a large file inside a folder under construction."""
    path = _check_inside_ours(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        yield fh


def build_remove(path: Path) -> None:
    """Drop an intermediate file inside a folder under construction."""
    with contextlib.suppress(FileNotFoundError):
        _check_inside_ours(path).unlink()


def build_text(path: Path, text: str) -> Path:
    return build_bytes(path, text.encode("utf-8"))


def build_copy(src: Path, path: Path) -> Path:
    path = _check_inside_ours(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, path)
    return path


def build_parquet(path: Path, table: Any, **options: Any) -> Path:
    """A (possibly large) Parquet file inside a folder under construction, written by
    pyarrow straight to disk."""
    import pyarrow.parquet as pq

    path = _check_inside_ours(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path), **options)
    return path


class ParquetAppender:
    """Row groups appended to a Parquet file inside a folder under construction."""

    def __init__(self, path: Path, schema: Any, **options: Any) -> None:
        import pyarrow.parquet as pq

        path = _check_inside_ours(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._pw = pq.ParquetWriter(str(path), schema, **options)

    def append(self, table: Any, **options: Any) -> None:
        self._pw.write_table(table, **options)

    def close(self) -> None:
        self._pw.close()


def build_parquet_stream(path: Path, schema: Any, **options: Any) -> ParquetAppender:
    return ParquetAppender(path, schema, **options)


def begin_dir(out: Path, kind: str, force: bool = False) -> Path:
    """Check ``out`` (before any work), clear our own leftovers, and return a new temporary
    sibling folder to fill with the ``build_*`` functions; :func:`commit_dir` puts it in
    place, :func:`discard_dir` drops it."""
    out = Path(out)
    check_out(out, kind, force)
    clean_leftovers(out)
    ensure_dir(out.parent)
    tmp = tmp_path(out)
    tmp.mkdir()
    OURS.add(tmp)
    raw_write(tmp / RECORD, (kind + "\n").encode(), sync=False)
    return tmp


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A private temporary folder (system temp) for intermediate state; the ``build_*``
    functions write into it, and it is removed when the block ends."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        path = Path(d)
        OURS.add(path)
        try:
            yield path
        finally:
            OURS.discard(path)


def adopt(tmp: Path) -> None:
    """Let a worker process write into a folder its parent began (:func:`begin_dir`): only a
    temporary folder of ours, with our record, is accepted."""
    tmp = Path(tmp)
    if not (is_our_tmp(tmp) and tmp.is_dir() and (tmp / RECORD).is_file()):
        raise BenchError("internal: not a temporary output folder of ours", file=str(tmp))
    OURS.add(tmp)


def discard_dir(tmp: Path) -> None:
    tmp = Path(tmp)
    if tmp in OURS:
        shutil.rmtree(tmp, ignore_errors=True)
        OURS.discard(tmp)


class BuildDir:
    """A folder output built in a temporary sibling and put in place as a whole::

        with building_dir(out, "shard", force, identical=same) as b:
            b.put("rollouts.parquet", data)
        b.result   # "written", "identical ...", "replaced; ..."
    """

    def __init__(self, out: Path, kind: str, force: bool,
                 identical: Callable[[Path, Path], bool] | None) -> None:
        self.out, self.kind, self.force, self.identical = Path(out), kind, force, identical
        self.tmp = tmp_path(self.out)
        self.result = ""

    def path(self, rel: str) -> Path:
        return self.tmp / rel

    def put(self, rel: str, data: bytes) -> Path:
        return build_bytes(self.tmp / rel, data)

    def put_text(self, rel: str, text: str) -> Path:
        return build_bytes(self.tmp / rel, text.encode("utf-8"))

    def copy_in(self, src: Path, rel: str) -> Path:
        return build_copy(src, self.tmp / rel)


@contextlib.contextmanager
def building_dir(out: Path, kind: str, force: bool = False,
                 identical: Callable[[Path, Path], bool] | None = None) -> Iterator[BuildDir]:
    b = BuildDir(out, kind, force, identical)
    ensure_dir(b.out.parent)
    b.tmp.mkdir()
    OURS.add(b.tmp)
    try:
        raw_write(b.tmp / RECORD, (kind + "\n").encode(), sync=False)
        yield b
        for p in b.tmp.rglob("*"):
            if p.is_file() and p.name != RECORD:
                with open(p, "rb") as fh:
                    os.fsync(fh.fileno())
        b.result = commit_dir(b.tmp, b.out, kind, force, identical)
    finally:
        discard_dir(b.tmp)


def commit_dir(tmp: Path, out: Path, kind: str, force: bool,
               identical: Callable[[Path, Path], bool] | None = None) -> str:
    """Put the finished ``tmp`` folder (ours) at ``out``; returns what happened, in words.
    In a frozen study the journal is opened, checked and locked before anything moves."""
    force = force or FORCED.get()
    raw_write(tmp / RECORD, (kind + "\n").encode(), sync=False)
    state = check_out(out, kind, force)
    cover = frozen.covering(out)
    with contextlib.ExitStack() as stack:
        j = stack.enter_context(open_journal(cover)) if cover is not None else None
        return _commit(tmp, out, kind, force, identical, state, cover, j)


def _commit(tmp: Path, out: Path, kind: str, force: bool,
            identical: Callable[[Path, Path], bool] | None, state: str, cover: Path | None,
            j: Journal | None) -> str:
    if state == "new":
        if out.exists():
            out.rmdir()  # empty (only ever an empty folder: check_out said so)
        os.replace(tmp, out)
        OURS.discard(tmp)
        fsync_dir(out.parent)
        if cover is not None and j is not None:
            # the folder the manifest covers was removed before this verb rebuilt it: its
            # frozen files that the new folder no longer holds were removed by this rebuild
            _journal_tree(j, cover, out, kind, _frozen_tree(cover, out))
        return "written"
    if identical is not None and identical(tmp, out):
        shutil.rmtree(tmp)
        OURS.discard(tmp)
        return "identical to the existing output; kept it"
    if not force:
        shutil.rmtree(tmp)
        OURS.discard(tmp)
        raise BenchError(f"an earlier {kind} output with different content is here; --force "
                         f"replaces it (the old one is moved aside, never deleted)",
                         file=str(out), field="out")
    old = _tree_digests(out) if cover is not None else None
    if cover is not None:
        aside = move_to_replaced(cover, out)
        os.replace(tmp, out)
    else:
        aside = aside_path(out)
        if _exchange(tmp, out):
            os.replace(tmp, aside)  # tmp now holds the old folder
        else:  # no atomic exchange: a crash between these two leaves the old copy aside
            os.replace(out, aside)
            os.replace(tmp, out)
    OURS.discard(tmp)
    fsync_dir(out.parent)
    if cover is not None and j is not None:
        _journal_tree(j, cover, out, kind, old)
    return f"replaced; the old one is kept at {aside}"


def _tree_digests(d: Path) -> dict[str, str]:
    return {p.relative_to(d).as_posix(): frozen.digest(p) or ""
            for p in sorted(d.rglob("*")) if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(d).parts)}


def _frozen_tree(root: Path, out: Path) -> dict[str, str] | None:
    """The manifest's entries under the folder ``out`` of the frozen study ``root``, relative
    to ``out`` (None: no manifest)."""
    man = frozen.manifest_of(root)
    if man is None:
        return None
    prefix = frozen.rel(root, out) + "/"
    return {rel[len(prefix):]: digest for rel, digest in man[0]["files"].items()
            if rel.startswith(prefix)}


def _journal_tree(j: Journal, root: Path, out: Path, kind: str,
                  old: dict[str, str] | None) -> None:
    """Journal a folder output put in place in a frozen study, in one append. A folder that
    was gone before (removed by hand, or by a workflow engine) replaces what the manifest
    listed under it: files it no longer holds are journalled as removed by this verb."""
    new = _tree_digests(out)
    if old is None:
        old = frozen.listed_under(root, out)
    j.append([(out / rel, kind, (old or {}).get(rel), new.get(rel))
              for rel in sorted(set(new) | set(old or {}))])
