"""The one write path: every file and folder the package writes goes through this module.

A static test (``tests/integrity/test_write_path.py``) walks the package's syntax trees and
fails on any write, rename or delete outside this module. The rules, in one place:

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

How a temporary is named and recognised, and what a folder's record says, is read by
:mod:`containmentbench.integrity.records` (no writes there); its names are importable from
here too.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import ctypes.util
import errno
import hashlib
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import frozen
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

_RENAME_EXCHANGE = 2
_ours: set[Path] = set()          # temporaries created by this process
_forced = contextvars.ContextVar("containmentbench_force", default=False)
_replaced: dict[Path, Path] = {}  # frozen study root -> this process's .replaced-<n>/


# ------------------------------------------------------------------ records and atomic writes
def _write_record(d: Path, rec: dict[str, Any]) -> None:
    text = json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n" if rec["files"] \
        else f"{rec['kind'] or 'folder'}\n"
    _raw_write(Path(d) / RECORD, text.encode(), sync=False)


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


def _update_record(d: Path, kind: str | None = None, name: str | None = None,
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


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _raw_write(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a new temporary beside ``path`` and rename it over ``path``."""
    tmp = tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    _ours.add(tmp)
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
        _ours.discard(tmp)


def _record(path: Path, kind: str) -> None:
    rec = read_record(path.parent)
    if rec is not None and rec["files"].get(path.name) == kind:
        return
    _update_record(path.parent, name=path.name, file_kind=kind)


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
            _update_record(d, kind=kind)
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
        _raw_write(q / RECORD, ((kind if q == d else "folder") + "\n").encode(), sync=False)
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
            _update_record(p.parent, name=p.name, file_kind=file_kind)
            n += 1
    _update_record(d, kind=kind)
    return n


@contextlib.contextmanager
def forcing(flag: bool) -> Iterator[None]:
    """Within the block, every write acts as if ``force`` were given when ``flag`` is true
    (a verb's ``--force`` reaches every file it writes without threading it through)."""
    token = _forced.set(bool(flag) or _forced.get())
    try:
        yield
    finally:
        _forced.reset(token)


# ------------------------------------------------------------------ file outputs
def check_file(path: Path, kind: str, force: bool = False) -> str:
    """Whether ``kind`` may write the file ``path``: ``"new"`` or ``"own"``, else a one-line
    error. Called by every verb before any work, so a refusal writes nothing."""
    path = Path(path)
    force = force or _forced.get()
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
    force = force or _forced.get()
    state = check_file(path, kind, force)
    if state == "own" and path.stat().st_size == len(data) and path.read_bytes() == data:
        _record(path, kind)
        return "identical to the existing output; kept it"
    if state == "own" and once and not force:
        raise BenchError(f"an earlier {kind} output with different content is here; --force "
                         f"replaces it (the old one is moved aside, never deleted)",
                         file=str(path), field="out")
    ensure_dir(path.parent)
    cover = frozen.covering(path)
    old = frozen.digest(path) if cover is not None else None
    aside = None
    if cover is not None and state == "own":
        aside = _move_to_replaced(cover, path)
    elif state == "own" and once:
        aside = aside_path(path)
        os.replace(path, aside)
    _raw_write(path, data, sync)
    _record(path, kind)
    if cover is not None:
        _journal(cover, path, kind, old, hashlib.sha256(data).hexdigest())
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
    _record(path, kind)


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
    old = frozen.digest(path) if cover is not None else None
    tmp = tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    _ours.add(tmp)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if cover is not None and state == "own":
            _move_to_replaced(cover, path)
        os.replace(tmp, path)
        _record(path, kind)
        if cover is not None:
            _journal(cover, path, kind, old, frozen.digest(path))
    finally:
        if tmp.exists():
            with contextlib.suppress(OSError):
                tmp.unlink()
        _ours.discard(tmp)


class ParquetStream:
    """A Parquet file written row group by row group (``pyarrow.parquet.ParquetWriter``),
    put in place by :meth:`close` only; :meth:`abort` leaves nothing."""

    def __init__(self, path: Path, schema: Any, *, kind: str, **options: Any) -> None:
        import pyarrow.parquet as pq

        self.path, self.kind = Path(path), kind
        check_file(self.path, kind)
        ensure_dir(self.path.parent)
        self.tmp = tmp_path(self.path)
        _ours.add(self.tmp)
        self.writer = pq.ParquetWriter(str(self.tmp), schema, **options)

    def write_table(self, table: Any) -> None:
        self.writer.write_table(table)

    def close(self) -> None:
        self.writer.close()
        os.replace(self.tmp, self.path)
        _ours.discard(self.tmp)
        _record(self.path, self.kind)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(OSError):
            self.tmp.unlink()
        _ours.discard(self.tmp)


def remove_owned(path: Path, kind: str) -> bool:
    """Delete a file whose record says ``kind`` wrote it (a job's own marker, a lock record
    of a finished run); anything else is left alone. Returns whether it was removed."""
    path = Path(path)
    if not path.is_file() or path.is_symlink() or owner_of(path) != kind:
        return False
    frozen.guard(path, force=False)
    path.unlink()
    _update_record(path.parent, drop=path.name)
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


# ------------------------------------------------------------------ frozen studies
def _move_to_replaced(root: Path, path: Path) -> Path:
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


def _journal(root: Path, path: Path, kind: str, old: str | None, new: str | None) -> None:
    line = frozen.journal_entry(root, path, kind, old, new)
    jpath = root / frozen.JOURNAL
    with open(jpath, "ab") as fh:  # one short line: an atomic append under O_APPEND
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def replace_in_study(path: Path, *, kind: str) -> None:
    """Journal the removal of a covered file (a shard quarantined by the pipeline)."""
    cover = frozen.covering(path)
    if cover is not None:
        _journal(cover, path, kind, frozen.digest(path), None)


# ------------------------------------------------------------------ folder outputs
def check_out(out: Path, kind: str, force: bool = False, accept: tuple[str, ...] = ()) -> str:
    """``"new"`` (missing or empty) or ``"own"`` (our earlier output of this kind, or of a kind
    in ``accept``); otherwise a one-line error. Called before any work."""
    out = Path(out)
    force = force or _forced.get()
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
        if not is_our_tmp(left, out.name) or left in _ours or left.is_symlink():
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
    for t in _ours:
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
    _ours.add(tmp)
    _raw_write(tmp / RECORD, (kind + "\n").encode(), sync=False)
    return tmp


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A private temporary folder (system temp) for intermediate state; the ``build_*``
    functions write into it, and it is removed when the block ends."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        path = Path(d)
        _ours.add(path)
        try:
            yield path
        finally:
            _ours.discard(path)


def adopt(tmp: Path) -> None:
    """Let a worker process write into a folder its parent began (:func:`begin_dir`): only a
    temporary folder of ours, with our record, is accepted."""
    tmp = Path(tmp)
    if not (is_our_tmp(tmp) and tmp.is_dir() and (tmp / RECORD).is_file()):
        raise BenchError("internal: not a temporary output folder of ours", file=str(tmp))
    _ours.add(tmp)


def discard_dir(tmp: Path) -> None:
    tmp = Path(tmp)
    if tmp in _ours:
        shutil.rmtree(tmp, ignore_errors=True)
        _ours.discard(tmp)


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
    _ours.add(b.tmp)
    try:
        _raw_write(b.tmp / RECORD, (kind + "\n").encode(), sync=False)
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
    """Put the finished ``tmp`` folder (ours) at ``out``; returns what happened, in words."""
    force = force or _forced.get()
    _raw_write(tmp / RECORD, (kind + "\n").encode(), sync=False)
    state = check_out(out, kind, force)
    cover = frozen.covering(out)
    if state == "new":
        if out.exists():
            out.rmdir()  # empty (only ever an empty folder: check_out said so)
        os.replace(tmp, out)
        _ours.discard(tmp)
        _fsync_dir(out.parent)
        if cover is not None:
            # the folder the manifest covers was removed before this verb rebuilt it
            # (Snakemake deletes a job's directory output first): its frozen files that
            # the new folder no longer holds were removed by this rebuild
            _journal_tree(cover, out, kind, _frozen_tree(cover, out))
        return "written"
    if identical is not None and identical(tmp, out):
        shutil.rmtree(tmp)
        _ours.discard(tmp)
        return "identical to the existing output; kept it"
    if not force:
        shutil.rmtree(tmp)
        _ours.discard(tmp)
        raise BenchError(f"an earlier {kind} output with different content is here; --force "
                         f"replaces it (the old one is moved aside, never deleted)",
                         file=str(out), field="out")
    old = _tree_digests(out) if cover is not None else None
    if cover is not None:
        aside = _move_to_replaced(cover, out)
        os.replace(tmp, out)
    else:
        aside = aside_path(out)
        if _exchange(tmp, out):
            os.replace(tmp, aside)  # tmp now holds the old folder
        else:  # no atomic exchange: a crash between these two leaves the old copy aside
            os.replace(out, aside)
            os.replace(tmp, out)
    _ours.discard(tmp)
    _fsync_dir(out.parent)
    if cover is not None:
        _journal_tree(cover, out, kind, old)
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
    prefix = Path(os.path.abspath(out)).relative_to(root).as_posix() + "/"
    return {rel[len(prefix):]: digest for rel, digest in man[0]["files"].items()
            if rel.startswith(prefix)}


def _journal_tree(root: Path, out: Path, kind: str, old: dict[str, str] | None) -> None:
    """Journal a folder output put in place in a frozen study. A folder that was gone before
    (a workflow removes a directory output before rebuilding it) replaces what the manifest
    listed under it: files it no longer holds are journalled as removed by this verb."""
    new = _tree_digests(out)
    if old is None:
        old = frozen.listed_under(root, out)
    for rel in sorted(set(new) | set(old or {})):
        _journal(root, out / rel, kind, (old or {}).get(rel), new.get(rel))


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
