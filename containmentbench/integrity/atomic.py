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
from containmentbench.integrity import journal as journal_mod
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
    # ``root`` is resolved and absolute; ``path`` may be relative or reached through a link
    rel = Path(frozen.rel(root, path))
    (base / rel).parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, base / rel)
    return base / rel


class Journal:
    """The journal of one frozen study, opened to append (:func:`open_journal`): checked and
    locked *before* the caller moves any covered file aside, so a journal that is a link, a
    FIFO or a device, or a chain that is broken, refuses the change while nothing has moved.
    Lines follow the study's chain (``integrity/journal.py``); with a key, each append moves
    this machine's record of the study's last line on (``integrity/heads.py``)."""

    def __init__(self, root: Path, fd: int) -> None:
        from containmentbench.integrity.keys import load_key

        self.root, self.fd = Path(root), fd
        self.man = frozen.manifest_of(self.root)
        self.key = load_key(self.root)
        st = os.fstat(fd)
        hit = _chains.get(self.root)
        if hit is not None and hit[0] == (st.st_ino, st.st_size, self.man and self.man[1]):
            self.chain = hit[1]
        else:
            data = os.pread(fd, st.st_size, 0) if st.st_size <= journal_mod.LIMIT else None
            if data is None:
                raise BenchError("the journal is larger than a journal can be; refusing to "
                                 "append to it", file=str(self.root / frozen.JOURNAL))
            self.chain = journal_mod.follow(data, self.man[0] if self.man else None,
                                            self.man[1] if self.man else None, self.key)
        if self.chain.problems:
            raise BenchError(f"the journal of this frozen study is broken "
                             f"({self.chain.problems[0]}); nothing was changed (containmentbench "
                             f"verify {self.root} and freeze name what to restore)",
                             file=str(self.root / frozen.JOURNAL))

    def append(self, changes: list[tuple[Path, str, str | None, str | None]]) -> None:
        """Journal ``(path, kind, old sha256, new sha256)`` for each change, in order."""
        if not changes:
            return
        man = self.man[0] if self.man else None
        base = self.man[1] if self.man else None
        seq, head = self.chain.seq, self.chain.head
        lines = []
        for path, kind, old, new in changes:
            seq += 1
            line = journal_mod.entry(man, base, seq, head, frozen.rel(self.root, path), kind,
                                     old, new, self.key)
            head = journal_mod.digest(line)
            lines.append(line)
        data = b"".join(lines)
        size = os.fstat(self.fd).st_size
        if size and os.pread(self.fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a line a crash cut short stays a line of its own
        os.write(self.fd, data)
        os.fsync(self.fd)
        self.chain.seq, self.chain.head = seq, head
        self.chain.seen[seq] = head
        st = os.fstat(self.fd)
        _chains[self.root] = ((st.st_ino, st.st_size, base), self.chain)
        if self.key is not None and man is not None and man.get("study_id"):
            move_head(self.root, man["study_id"], seq, head, self.key)


_chains: dict[Path, tuple[tuple[int, int, str | None], Any]] = {}


@contextlib.contextmanager
def open_journal(root: Path) -> Iterator[Journal]:
    """The study's journal, opened without following a link and without blocking, checked
    to be a regular file, and locked (exclusive) for the block."""
    import errno
    import fcntl
    import stat

    path = Path(root) / frozen.JOURNAL
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        why = ("is a symbolic link" if exc.errno == errno.ELOOP
               else f"cannot be opened ({exc.strerror})")
        raise BenchError(f"the journal of this frozen study {why}; refusing to append "
                         f"through it, nothing was changed", file=str(path)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from containmentbench.integrity.safeopen import kind_of_mode

            raise BenchError(f"the journal of this frozen study is {kind_of_mode(st.st_mode)}, "
                             f"not a regular file; nothing was changed", file=str(path))
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield Journal(root, fd)
    finally:
        os.close(fd)


def journal(root: Path, path: Path, kind: str, old: str | None, new: str | None) -> None:
    """Journal one change (a caller that has nothing to move aside first)."""
    with open_journal(root) as j:
        j.append([(path, kind, old, new)])


# ------------------------------------------------------------------ per-user heads
def write_head(root: Path, rec: dict[str, Any], manifest: bytes | None) -> Path:
    """Write this machine's record of a keyed study's head (and the manifest's copy)."""
    from containmentbench.integrity import heads

    d = ensure_dir(heads.heads_dir(), "heads")
    path = d / f"{rec['study_id']}-{heads.folder_digest(root)}.json"
    if manifest is not None:
        raw_write(heads.copy_path(path), manifest)
    raw_write(path, (json.dumps(rec, sort_keys=True, indent=1) + "\n").encode())
    return path


def move_head(root: Path, study_id: str, seq: int, head: str, key: bytes) -> None:
    """Move the record's journal position on (a verb journalled a change)."""
    from containmentbench.integrity import heads

    path = heads.record_path(study_id, root)
    if not path.is_file():
        return  # not frozen on this machine yet: its next freeze writes the record
    h = heads.load(path, key)
    if isinstance(h, str):
        return  # a damaged record: freeze and verify report it
    doc = heads.body(h.doc)
    rec = heads.make(doc["study_id"], root, doc["freeze"], doc["manifest_sha256"], seq, head,
                     doc["traces"], key)
    raw_write(path, (json.dumps(rec, sort_keys=True, indent=1) + "\n").encode())


def retire_heads(root: Path) -> list[Path]:
    """Move this folder's records aside (``heads/retired/``): a new identity starts here."""
    from containmentbench.integrity import heads

    d = heads.heads_dir()
    out = []
    if d.is_dir():
        for p in sorted(d.glob(f"*-{heads.folder_digest(root)}*.json")):
            target = d / "retired" / p.name
            ensure_dir(target.parent, "heads")
            n = 0
            while target.exists():
                n += 1
                target = target.with_name(f"{p.name}.{n}")
            os.replace(p, target)
            out.append(target)
    return out


# ------------------------------------------------------------------ the study lock
#: set by a workflow run that holds its studies' locks: its jobs write under that lock
ENV_PIPELINE = "CONTAINMENTBENCH_PIPELINE_LOCK"
_locks: dict[Path, int] = {}
_roots: dict[Path, Path | None] = {}


def study_root(path: Path) -> Path | None:
    """The study folder a write at ``path`` goes into (its folder resolved): the nearest
    frozen study, or the nearest run folder of the pipeline (record kind ``run`` or
    ``cross-model``); None: no study."""
    from containmentbench.integrity.safeopen import resolved

    p = resolved(path)
    parent = p.parent
    if parent in _roots:
        return _roots[parent]
    found = None
    for d in [p, *p.parents][:8]:
        if frozen.manifest_of(d) is not None:
            found = d
            break
        try:
            rec = read_record(d) if d.is_dir() else None
        except BenchError:
            rec = None
        if rec is not None and rec["kind"] in ("run", "cross-model"):
            found = d
            break
    _roots[parent] = found
    return found


def lock_study(root: Path, token: str | None = None) -> None:
    """Hold the study's lock (exclusive, never waiting) until :func:`release_locks` or the
    end of the process. A job of the workflow run that holds it (the same ``token`` in its
    environment) writes under that run's lock; anyone else is refused, one line. The lock
    file lies in the user's state folder (``locks/<folder digest>.lock``), not in the study:
    a refused command leaves every byte of the study as it was."""
    import errno
    import fcntl
    import stat
    import sys

    from containmentbench.integrity import heads

    root = Path(os.path.realpath(root))
    if root in _locks:
        return
    path = ensure_dir(heads.state_dir() / "locks", "locks") / f"{heads.folder_digest(root)}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else f"({exc.strerror})"
        raise BenchError(f"the lock file of the study {root} cannot be opened {why}; nothing "
                         f"was changed", file=str(path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BenchError(f"the lock file of the study {root} is not a regular file; nothing "
                         f"was changed", file=str(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").split()
        os.close(fd)
        mine = os.environ.get(ENV_PIPELINE)
        if mine and holder and holder[0] == mine:
            _locks[root] = -1  # a job of the run that holds the lock
            return
        who = " ".join(holder[1:3]) if len(holder) > 1 else "another process"
        raise BenchError(f"another command or workflow run is writing into this study "
                         f"({who}); nothing was changed: run this again when it has finished",
                         file=str(root), field="out") from None
    if token is not None or not os.environ.get(ENV_PIPELINE):
        # (a job of a workflow run that got the lock, on a file system whose locks its run
        # does not see, leaves the run's line alone)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{token or 'command'} pid={os.getpid()} "
                      f"{os.path.basename(sys.argv[0] or 'python')} {root}\n".encode(), 0)
    _locks[root] = fd


def lock_for(path: Path) -> None:
    """Take the lock of the study a write at ``path`` goes into (none: no study)."""
    root = study_root(path)
    if root is not None:
        lock_study(root)


def release_locks() -> None:
    """Let go of every study lock this process holds (the end of a command)."""
    for fd in _locks.values():
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
    _locks.clear()
    _roots.clear()
