"""The one write path: every file and folder the package writes goes through this module.

A static test (``tests/integrity/test_write_path.py``) walks the package's syntax trees and
fails on any write, rename or delete outside this module and the two it is built from
(``folders``, ``atomic``: see the end of this text). The rules, in one place:

* **Atomic.** Bytes go to a temporary sibling (``.<name>.cbtmp-<random>-<tag>``, created
  with ``O_EXCL``), are fsync'd and renamed over the target; a killed process leaves a hidden
  temporary, never a half-written output.
* **Owned.** A folder this module creates carries an ownership record (:data:`RECORD`: the
  kind of output, and the kind that wrote each file it holds; one hidden file per folder,
  updated under a lock on the folder). An existing file is replaced only when its record names the same kind of
  output, an existing folder only when it is that kind of output: ``--out`` pointing at a
  study's manifest, a committed suite or a home folder is refused, ``--force`` or not.
* **Frozen studies are immutable** (:mod:`containmentbench.integrity.frozen`): a file a
  study's ``MANIFEST.json`` covers is changed only with ``force``; its old bytes then move to
  ``<study>/.replaced-<n>/`` and the change is journalled, so ``freeze`` can tell a rebuilt
  output from an edited one.
* **Never deleting what is not ours.** Cleanup removes only temporaries this process created,
  or leftovers whose name carries our tag *and* (for folders) our record; a user's
  ``.data.old-backup`` beside an ``--out`` is never touched. Replaced outputs are moved
  aside, never deleted.

This module holds the file outputs and is the one API: the folder outputs live in
:mod:`containmentbench.integrity.folders`, the primitives both use (the atomic write, the
records, the frozen-study journal) in :mod:`containmentbench.integrity.atomic`, and how a
temporary is named and a record read in :mod:`containmentbench.integrity.records` (no writes
there); every public name of those three is importable from here, and no other module
imports ``atomic`` or ``folders``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import atomic, frozen, safeopen
from containmentbench.integrity.atomic import (  # noqa: F401  (re-exported: the writer's API)
    adopt_legacy,
    ensure_dir,
    forcing,
)
from containmentbench.integrity.folders import (  # noqa: F401  (re-exported: the writer's API)
    BuildDir,
    ParquetAppender,
    adopt,
    aside_path,
    begin_dir,
    build_bytes,
    build_copy,
    build_open,
    build_parquet,
    build_parquet_stream,
    build_remove,
    build_text,
    building_dir,
    check_out,
    clean_leftovers,
    commit_dir,
    discard_dir,
    scratch_dir,
)
from containmentbench.integrity.records import (  # noqa: F401  (re-exported: the writer's API)
    MARKER,
    RECORD,
    all_ours,
    folder_entries,
    glob_escape,
    is_our_tmp,
    kind_of,
    owner_of,
    read_record,
    tmp_path,
)


# ------------------------------------------------------------------ file outputs
def check_file(path: Path, kind: str, force: bool = False) -> str:
    """Whether ``kind`` may write the file ``path``: ``"new"`` or ``"own"``, else a one-line
    error. Called by every verb before any work, so a refusal writes nothing."""
    path = Path(path)
    force = force or atomic.FORCED.get()
    atomic.lock_for(path)  # the study it goes into, before any check or work
    if path.exists() or path.is_symlink():
        if path.is_symlink() or not path.is_file():
            raise BenchError("exists and is not a regular file; refusing to replace it",
                             file=str(path), field="out")
        owner = owner_of(path)
        if owner != kind:
            what = f"a {owner} output" if owner else "not written by containmentbench"
            raise BenchError(f"refusing to overwrite a file that is {what} (this verb writes "
                             f"{kind} outputs); nothing was changed, --force or not",
                             file=str(path), field="out")
        state = "own"
    else:
        if path.parent.exists() and not path.parent.is_dir():
            raise BenchError("the parent is not a folder", file=str(path), field="out")
        state = "new"
    frozen.guard(path, force)
    return state


def write_bytes(path: Path, data: bytes, *, kind: str, force: bool = False,
                sync: bool = True, once: bool = False) -> str:
    """Write one output file (see the module rules); returns what happened, in words.
    ``once``: an earlier output with other content is replaced only with ``force`` (and
    then moved aside), for results a rerun must not silently change."""
    path = Path(path)
    force = force or atomic.FORCED.get()
    state = check_file(path, kind, force)
    if state == "own" and path.stat().st_size == len(data) and safeopen.read_bytes(
            path, limit=len(data), what="output", follow=False) == data:
        atomic.record_file(path, kind)
        return "identical to the existing output; kept it"
    if state == "own" and once and not force:
        raise BenchError(f"an earlier {kind} output with different content is here; --force "
                         f"replaces it (the old one is moved aside, never deleted)",
                         file=str(path), field="out")
    ensure_dir(path.parent)
    cover = frozen.covering(path)
    aside = None
    if cover is not None:
        # the journal is opened, checked and locked before anything moves: a journal that
        # is a link, a FIFO or a broken chain refuses the change while nothing has moved
        with atomic.open_journal(cover) as j:
            old = frozen.digest(path)
            if state == "own":
                aside = atomic.move_to_replaced(cover, path)
            atomic.raw_write(path, data, sync)
            atomic.record_file(path, kind)
            j.append([(path, kind, old, hashlib.sha256(data).hexdigest())])
    else:
        if state == "own" and once:
            aside = aside_path(path)
            os.replace(path, aside)
        atomic.raw_write(path, data, sync)
        atomic.record_file(path, kind)
    return "written" if aside is None else f"replaced; the old bytes are kept at {aside}"


def write_text(path: Path, text: str, *, kind: str, force: bool = False,
               sync: bool = True, once: bool = False) -> str:
    return write_bytes(path, text.encode("utf-8"), kind=kind, force=force, sync=sync,
                       once=once)


def write_json(path: Path, obj: Any, *, kind: str, force: bool = False, indent: int | None = 2,
               sort_keys: bool = True, once: bool = False) -> str:
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys) + "\n"
    return write_text(path, text, kind=kind, force=force, once=once)


def append_line(path: Path, data: bytes, *, kind: str) -> None:
    """Append one record to an append-only log this kind owns (fsync'd)."""
    path = Path(path)
    if path.exists():
        check_file(path, kind)
    else:
        ensure_dir(path.parent)
    with open(path, "ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    atomic.record_file(path, kind)


def truncate_log(path: Path, size: int, *, kind: str) -> None:
    """Cut an append-only log this kind owns back to ``size`` bytes (a record a crash left
    half-written; the log is never read past it)."""
    path = Path(path)
    check_file(path, kind)
    with open(path, "r+b") as fh:
        fh.truncate(size)
        os.fsync(fh.fileno())


@contextlib.contextmanager
def stream(path: Path, *, kind: str, force: bool = False) -> Iterator[Any]:
    """A binary file handle for an output too large to hold in memory; the file appears at
    ``path`` only when the block ends without an error."""
    path = Path(path)
    state = check_file(path, kind, force)
    ensure_dir(path.parent)
    cover = frozen.covering(path)
    tmp = tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    atomic.OURS.add(tmp)
    try:
        with contextlib.ExitStack() as stack:
            # a frozen study's journal: checked and locked before the bytes are produced
            j = stack.enter_context(atomic.open_journal(cover)) if cover is not None else None
            old = frozen.digest(path) if cover is not None else None
            with os.fdopen(fd, "wb") as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            if cover is not None and state == "own":
                atomic.move_to_replaced(cover, path)
            os.replace(tmp, path)
            atomic.record_file(path, kind)
            if j is not None:
                j.append([(path, kind, old, frozen.digest(path))])
    finally:
        if tmp.exists():
            with contextlib.suppress(OSError):
                tmp.unlink()
        atomic.OURS.discard(tmp)


class ParquetStream:
    """A Parquet file written row group by row group (``pyarrow.parquet.ParquetWriter``),
    put in place by :meth:`close` only; :meth:`abort` leaves nothing."""

    def __init__(self, path: Path, schema: Any, *, kind: str, **options: Any) -> None:
        import pyarrow.parquet as pq

        self.path, self.kind = Path(path), kind
        check_file(self.path, kind)
        ensure_dir(self.path.parent)
        self.tmp = tmp_path(self.path)
        atomic.OURS.add(self.tmp)
        self.writer = pq.ParquetWriter(str(self.tmp), schema, **options)

    def write_table(self, table: Any) -> None:
        self.writer.write_table(table)

    def close(self) -> None:
        self.writer.close()
        os.replace(self.tmp, self.path)
        atomic.OURS.discard(self.tmp)
        atomic.record_file(self.path, self.kind)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()
        atomic.OURS.discard(self.tmp)


def remove_owned(path: Path, kind: str) -> bool:
    """Delete a file whose record says ``kind`` wrote it (a job's own marker, a lock record
    of a finished run); anything else is left alone. Returns whether it was removed."""
    path = Path(path)
    if not path.is_file() or path.is_symlink() or owner_of(path) != kind:
        return False
    frozen.guard(path, force=False)
    path.unlink()
    atomic.update_record(path.parent, drop=path.name)
    return True


def move_aside(path: Path, target: Path) -> Path:
    """Move a file or folder (a corrupt shard, a withdrawn marker) to ``target``: kept,
    never deleted."""
    target = Path(target)
    ensure_dir(target.parent)
    n = 0
    final = target
    while final.exists():
        n += 1
        final = target.with_name(f"{target.name}.{n}")
    os.replace(path, final)
    return final


def replace_in_study(path: Path, *, kind: str) -> None:
    """Journal the removal of a covered file (a shard quarantined by the pipeline)."""
    cover = frozen.covering(path)
    if cover is not None:
        atomic.journal(cover, path, kind, frozen.digest(path), None)


#: set by a workflow run that holds its studies' locks: its jobs write under that lock
ENV_PIPELINE = atomic.ENV_PIPELINE


def lock_study(root: Path, token: str | None = None) -> None:
    """Hold the lock of the study folder ``root`` for the rest of the command (every verb
    that writes into a study takes it; a workflow run holds it for its jobs, ``token``)."""
    atomic.lock_study(root, token)


def release_locks() -> None:
    atomic.release_locks()


def write_head(root: Path, rec: dict[str, Any], manifest: bytes | None) -> Path:
    """This machine's record of a keyed study's last freeze (``integrity/heads.py``)."""
    return atomic.write_head(root, rec, manifest)


def retire_heads(root: Path) -> list[Path]:
    """Set this folder's head records aside: a new study identity starts there."""
    return atomic.retire_heads(root)


@contextlib.contextmanager
def journal_locked(root: Path) -> Iterator[Any]:
    """The frozen study's journal, checked and locked (``freeze`` holds it while it reads
    the chain and writes the manifest, so no verb appends in between)."""
    with atomic.open_journal(root) as j:
        yield j


# ------------------------------------------------------------------ serialisers
def parquet_bytes(table: Any, **options: Any) -> bytes:
    """A pyarrow table as Parquet bytes (the same bytes a file write gives)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    return sink.getvalue().to_pybytes()


def figure_bytes(fig: Any, fmt: str, **options: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, **options)
    return buf.getvalue()


def no_space(exc: OSError, path: Path) -> BenchError | None:
    """A disk-full error as a one-line error naming the output (None: another error)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return BenchError("no space left on the device while writing this output",
                          file=str(exc.filename or path))
    return None


def stdout_to_devnull() -> None:
    """Point file descriptor 1 at /dev/null (the CLI after its reader closed the pipe, so the
    interpreter's last flush at exit writes nowhere instead of raising). Writes no file."""
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
