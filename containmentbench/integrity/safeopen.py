"""One safe way to open a file the project did not just write (issue 37, item 5).

A FIFO or a link to ``/dev/zero`` named ``.rebuilt.jsonl``, ``.containmentbench-out`` or an
OTLP file hung a verb (an open that waits for a writer) or ate memory until the kernel killed
it; a journal reached through a symbolic link was appended to wherever the link pointed. Every
read of such a file goes through :func:`read_bytes` (or :func:`read_text`,
:func:`check_regular` for a path a library opens itself, such as Parquet):

* the open never blocks (``O_NONBLOCK``) and, where the file is the study's own
  (``follow=False``), never follows a symbolic link (``O_NOFOLLOW``);
* ``fstat`` on the open descriptor must say *regular file*: a FIFO, a character or block
  device, a socket or a folder is refused, one line naming the file;
* the size is capped (``limit``), before and while reading, so a file that grows while it is
  read cannot take the memory either;
* ``within``: the file, every symbolic link resolved, must lie inside that folder (a link
  out of a study is refused, not opened).

:func:`resolved` gives the path every ownership and frozen-study check works on: its folder
with every symbolic link resolved, so an ``--out`` reached through a symlinked parent is
seen where it really is. Nothing here writes.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from containmentbench.errors import BenchError

KIB, MIB = 1 << 10, 1 << 20
#: caps for the files the project reads back (a larger one is refused, not read)
LIMIT_JSON = 256 * MIB
LIMIT_RECORD = 16 * MIB
LIMIT_TEXT = 64 * MIB
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"))


def kind_of_mode(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def resolved(path: str | Path) -> Path:
    """``path`` with its folder's symbolic links resolved (the last component is kept as
    named: whether *it* is a link is the caller's check)."""
    p = Path(os.path.abspath(path))
    return Path(os.path.realpath(p.parent)) / p.name


def _inside(path: Path, within: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(within))
    except ValueError:
        return False
    return True


def open_regular(path: str | Path, *, what: str = "file", follow: bool = True,
                 within: str | Path | None = None, field: str | None = None
                 ) -> tuple[int, os.stat_result]:
    """An open, non-blocking, read-only descriptor of the regular file ``path`` and its
    ``fstat``; anything else is a one-line :class:`BenchError` naming the file."""
    path = Path(path)
    if within is not None and not _inside(path, Path(within)):
        raise BenchError(f"the {what} is a link out of {within}; refusing to open it",
                         file=str(path), field=field)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise BenchError(f"{what} not found", file=str(path), field=field) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BenchError(f"the {what} is a symbolic link; refusing to follow it",
                             file=str(path), field=field) from None
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO opened for writing)
            raise BenchError(f"the {what} is a socket or a FIFO, not a regular file; "
                             f"refusing to read it", file=str(path), field=field) from None
        raise BenchError(f"cannot open the {what} ({exc.strerror})", file=str(path),
                         field=field) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise BenchError(f"the {what} is {kind_of_mode(st.st_mode)}, not a regular file; "
                         f"refusing to read it", file=str(path), field=field)
    return fd, st


def read_bytes(path: str | Path, *, limit: int, what: str = "file", follow: bool = True,
               within: str | Path | None = None, field: str | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see the module rules)."""
    fd, st = open_regular(path, what=what, follow=follow, within=within, field=field)
    try:
        if st.st_size > limit:
            raise BenchError(f"the {what} holds {st.st_size:,} bytes, more than the "
                             f"{limit:,} this reader takes; refusing to read it",
                             file=str(path), field=field)
        chunks, n = [], 0
        while True:
            try:
                block = os.read(fd, min(MIB, limit + 1 - n))
            except OSError as exc:
                raise BenchError(f"cannot read the {what} ({exc.strerror})", file=str(path),
                                 field=field) from None
            if not block:
                break
            chunks.append(block)
            n += len(block)
            if n > limit:
                raise BenchError(f"the {what} grew past the {limit:,} bytes this reader "
                                 f"takes while it was read; refusing it", file=str(path),
                                 field=field)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path, *, limit: int, what: str = "file", follow: bool = True,
              within: str | Path | None = None, field: str | None = None) -> str:
    """:func:`read_bytes` as UTF-8 text (anything else: one line naming the file)."""
    data = read_bytes(path, limit=limit, what=what, follow=follow, within=within, field=field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchError(f"the {what} is not UTF-8 text (byte {exc.start})", file=str(path),
                         field=field) from None


def check_regular(path: str | Path, *, what: str = "file", follow: bool = True,
                  within: str | Path | None = None, field: str | None = None) -> None:
    """Refuse (one line) a path that is not a regular file before a library opens it
    itself (pyarrow's Parquet reader would block on a FIFO)."""
    fd, _ = open_regular(path, what=what, follow=follow, within=within, field=field)
    os.close(fd)
