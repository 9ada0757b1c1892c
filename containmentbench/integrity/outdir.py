"""``--out`` folders and files: never delete what we did not write.

Every verb that writes a folder first calls :func:`check_out` (before any work, so a refusal
writes nothing), builds its result in a hidden temporary sibling, and hands it to
:func:`commit_dir`:

* a missing or empty target is simply filled;
* a target that is not this verb's own output (a study, a home folder, another kind of
  output) is refused with one line, ``--force`` or not;
* the verb's own earlier output is kept when the new one is identical, and otherwise replaced
  only with ``--force``: the old folder is moved aside to ``.<name>.replaced-<n>`` and kept.

The swap of new and old is one ``renameat2(RENAME_EXCHANGE)`` where the kernel offers it, so
a crash leaves either the old or the new folder in place, never neither; leftovers of a killed
run (``.<name>.tmp-*``) are cleaned by :func:`clean_leftovers` on the next run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from containmentbench.errors import BenchError

MARKER = ".containmentbench-out"
# The names each kind of folder may hold; a folder holding only these (plus the marker) is
# recognised as that kind even when it was written before markers existed.
KINDS: dict[str, frozenset[str] | None] = {
    "shard": frozenset({"rollouts.parquet", "events.parquet", "edges.parquet",
                        "timings.parquet", "SHA256SUMS", "SHARD.json"}),
    "reparse": frozenset({"reparse.parquet", "summary.json"}),
    "suite": frozenset({"MANIFEST.json", "security.jsonl", "memory_recovery.jsonl",
                        "active_tainted.jsonl", "clean.jsonl"}),
    "cim-store": None,   # recognised by its marker or its manifest.json producer
}
_RENAME_EXCHANGE = 2


def _entries(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.name != MARKER)


def kind_of(d: Path) -> str | None:
    """Which containmentbench output a folder is (None: not one of ours)."""
    m = d / MARKER
    if m.is_file():
        try:
            return m.read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None
    names = {p.name for p in _entries(d)}
    for kind, allowed in KINDS.items():
        if allowed is not None and names and names <= allowed:
            return kind
    if "index.html" in names and all(n.endswith((".html", ".css", ".js", ".svg"))
                                     or n in ("rollouts", "figures", "assets") for n in names):
        return "report"  # a static HTML report written before markers existed
    man = d / "manifest.json"
    if man.is_file() and names <= {"manifest.json", "events", "delegations", "otel",
                                    "truth", "truth.parquet"}:
        return "cim-store"
    return None


def check_out(out: Path, kind: str, force: bool = False) -> str:
    """``"new"`` (missing or empty) or ``"own"`` (our earlier output of this kind); otherwise a
    one-line error. Called before any work."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return "new"
    if out.is_symlink() or not out.is_dir():
        raise BenchError(f"exists and is not a folder; refusing to replace it (--out must name "
                         f"a new or empty folder, or an earlier {kind} output)", file=str(out),
                         field="out")
    try:
        entries = _entries(out)
    except OSError as exc:
        raise BenchError(f"cannot list the folder ({exc.strerror})", file=str(out),
                         field="out") from None
    if not entries:
        return "new"
    if kind_of(out) == kind:
        return "own"
    raise BenchError(f"refusing to write into a non-empty folder that is not a {kind} output "
                     f"(it holds '{entries[0].name}'); nothing was changed, --force or not: "
                     f"choose a new or empty folder", file=str(out), field="out")


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
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def tmp_path(out: Path) -> Path:
    return out.parent / f".{out.name}.tmp-{os.getpid()}"


def clean_leftovers(out: Path, complete: Callable[[Path], bool] | None = None) -> list[Path]:
    """Deal with what a killed run of this output left: an incomplete temporary folder is
    removed (it was ours and never finished); a complete one (the old folder after a swap, or
    a finished result never renamed in) is moved aside and kept. Returns what was kept."""
    kept = []
    out = Path(out)
    if not out.parent.exists():
        return kept
    for left in sorted(out.parent.glob(f".{out.name}.tmp-*")) + \
            sorted(out.parent.glob(f".{out.name}.old-*")):
        if complete is not None and complete(left):
            target = aside_path(out)
            os.replace(left, target)
            kept.append(target)
        else:
            shutil.rmtree(left, ignore_errors=True)
    return kept


def commit_dir(tmp: Path, out: Path, kind: str, force: bool,
               identical: Callable[[Path, Path], bool] | None = None) -> str:
    """Put the finished ``tmp`` folder at ``out``; returns what happened, in words."""
    (tmp / MARKER).write_text(kind + "\n", encoding="utf-8")
    state = check_out(out, kind, force)
    if state == "new":
        if out.exists():
            out.rmdir()  # empty (only ever an empty folder: check_out said so)
        os.replace(tmp, out)
        return "written"
    if identical is not None and identical(tmp, out):
        shutil.rmtree(tmp)
        return "identical to the existing output; kept it"
    if not force:
        shutil.rmtree(tmp)
        raise BenchError(f"an earlier {kind} output with different content is here; --force "
                         f"replaces it (the old one is moved aside, never deleted)",
                         file=str(out), field="out")
    aside = aside_path(out)
    if _exchange(tmp, out):
        os.replace(tmp, aside)  # tmp now holds the old folder
    else:  # no atomic exchange: a crash between these two leaves the old copy aside, kept
        os.replace(out, aside)
        os.replace(tmp, out)
    return f"replaced; the old one is kept at {aside}"


def check_out_file(out: Path, is_own: Callable[[Path], bool]) -> str:
    """The same rule for a single output file: ``"new"``, ``"own"`` or a one-line error."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        if out.parent.exists() and not out.parent.is_dir():
            raise BenchError("the parent is not a folder", file=str(out), field="out")
        return "new"
    if out.is_symlink() or not out.is_file():
        raise BenchError("exists and is not a regular file; refusing to replace it",
                         file=str(out), field="out")
    if out.stat().st_size == 0 or is_own(out):
        return "own"
    raise BenchError("refusing to overwrite a file this verb did not write", file=str(out),
                     field="out")


def commit_file(tmp: Path, out: Path, force: bool) -> str:
    if out.exists():
        if out.read_bytes() == tmp.read_bytes():
            tmp.unlink()
            return "identical to the existing output; kept it"
        if not force and out.stat().st_size:
            tmp.unlink()
            raise BenchError("an earlier output with different content is here; --force "
                             "replaces it (the old one is moved aside, never deleted)",
                             file=str(out), field="out")
        if out.stat().st_size:
            os.replace(out, aside_path(out))
    os.replace(tmp, out)
    return "written"
