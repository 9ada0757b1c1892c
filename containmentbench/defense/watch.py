"""What a defense does besides answering its hooks: watched with Python's audit hooks
(PEP 578) while a hook runs, for ``containmentbench defenses check``.

The context hands a defense nothing of the benchmark's ground truth; a defense could still
reach around it: walk the interpreter's frames or objects to the runtime that holds the
scenario record, or open the suite's files. Python raises an audit event for each of these
(``sys._getframe``, ``gc.get_objects``, ``open`` ...); the watcher records those that happen
inside a hook, with the defense, the hook and the scenario, and so do writes and network or
process calls a hook should not make. The host marks every hook call (:func:`enter_hook`), a
context variable set and reset, so watching costs nothing when no watcher is installed.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CURRENT: contextvars.ContextVar[tuple[str, str, str] | None] = \
    contextvars.ContextVar("containmentbench_hook", default=None)

#: introspection that reaches objects the context does not hand out
INTROSPECTION = frozenset({"sys._getframe", "sys._current_frames", "gc.get_objects",
                           "gc.get_referrers", "gc.get_referents", "sys._getframemodulename"})
#: side effects a hook has no business making
EFFECTS = frozenset({"os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.truncate",
                     "os.chmod", "shutil.rmtree", "shutil.copyfile", "shutil.move",
                     "socket.connect", "socket.bind", "subprocess.Popen", "os.system",
                     "os.exec", "os.spawn", "os.posix_spawn", "os.fork"})
#: the standard library calls frames for its own bookkeeping (a logger finding its caller,
#: a warning's location): not a defense reaching around its context
_BENIGN_CALLERS = ("logging", "warnings", "typing", "dataclasses", "enum", "inspect",
                   "traceback", "linecache", "functools", "collections", "abc",
                   "importlib", "encodings", "codecs", "re", "contextlib")


def enter_hook(layer: str, hook: str, where: str) -> contextvars.Token[Any]:
    """Mark a hook call (what the watcher reports it under); :func:`leave_hook` ends it.
    A plain set and reset: the host calls this at every hook of every rollout."""
    return _CURRENT.set((layer, hook, where))


def leave_hook(token: contextvars.Token[Any]) -> None:
    _CURRENT.reset(token)


@dataclass
class Finding:
    layer: str
    hook: str
    scenario: str
    event: str
    detail: str


@dataclass
class Watcher:
    """Collects findings while ``active``; ``protected`` are folders a defense may not
    read (the suites, the results)."""

    protected: tuple[Path, ...] = ()
    findings: list[Finding] = field(default_factory=list)
    active: bool = False
    busy: bool = False  # the watcher's own calls raise audit events too

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active or self.busy:
            return
        self.busy = True
        try:
            self._see(event, args)
        finally:
            self.busy = False

    def _see(self, event: str, args: tuple[Any, ...]) -> None:
        cur = _CURRENT.get()
        if cur is None:
            return
        detail = None
        if event in INTROSPECTION:
            caller = sys._getframe(1)
            while caller is not None and caller.f_globals.get("__name__", "").startswith(
                    "containmentbench.defense.watch"):
                caller = caller.f_back
            mod = (caller.f_globals.get("__name__", "") if caller is not None else "")
            if mod.split(".")[0] in _BENIGN_CALLERS:
                return
            detail = f"introspection from {mod or '?'} (could reach the benchmark's state)"
        elif event == "open" and args:
            path, mode = args[0], args[1] if len(args) > 1 else "r"
            if isinstance(path, int):
                return
            p = Path(str(path)).resolve() if isinstance(path, (str, bytes, Path)) else None
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                detail = f"writes {path}"
            elif p is not None and any(p.is_relative_to(d) for d in self.protected):
                detail = f"reads {path} (the benchmark's own files)"
        elif event in EFFECTS or event.split(".")[0] in ("subprocess",):
            detail = f"{event} {args[0] if args else ''}".strip()
        if detail is not None:
            self.findings.append(Finding(*cur, event, detail))


_INSTALLED: list[Watcher] = []


@contextmanager
def watching(protected: tuple[Path, ...] = ()) -> Iterator[Watcher]:
    """Record what hooks do until the block ends (the audit hook itself stays installed for
    the process, as audit hooks cannot be removed; it is inert outside a block)."""
    if not _INSTALLED:
        w = Watcher()
        sys.addaudithook(w)
        _INSTALLED.append(w)
    w = _INSTALLED[0]
    w.protected, w.findings, w.active = tuple(p.resolve() for p in protected), [], True
    try:
        yield w
    finally:
        w.active = False
