"""Progress of long steps: done/total, rate and ETA on stderr.

On a terminal this is a tqdm bar; elsewhere (Slurm logs, Snakemake logs, pipes) it is one
plain line every ``CB_PROGRESS_INTERVAL`` seconds (default 30) and a last line at the end, so
a log tells how far a job got and how long it has left without carriage-return noise.
``CB_PROGRESS=0`` silences it. Progress never touches stdout or any output file.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

T = TypeVar("T")


def _fmt_s(s: float) -> str:
    s = max(0, round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


class Progress:
    """Counts units of work; ``update(n)`` after each; ``close()`` at the end."""

    def __init__(self, total: int | None, desc: str, unit: str = "it",
                 stream: TextIO | None = None, interval: float | None = None,
                 tty: bool | None = None) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.stream = stream or sys.stderr
        self.enabled = os.environ.get("CB_PROGRESS", "1") != "0"
        self.interval = float(interval if interval is not None
                              else os.environ.get("CB_PROGRESS_INTERVAL", "30"))
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self.start = self.last = time.monotonic()
        self._bar = None
        if self.enabled and self.tty:
            from tqdm import tqdm
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream,
                             dynamic_ncols=True, leave=False)

    def line(self) -> str:
        el = time.monotonic() - self.start
        rate = self.done / el if el > 0 else 0.0
        parts = [f"{self.desc}: {self.done}"]
        if self.total:
            parts[0] += f"/{self.total} ({100 * self.done / self.total:.0f}%)"
        parts.append(f"{rate:.2f} {self.unit}/s")
        parts.append(f"elapsed {_fmt_s(el)}")
        if self.total and rate > 0 and self.done < self.total:
            parts.append(f"ETA {_fmt_s((self.total - self.done) / rate)}")
        return ", ".join(parts)

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        print(self.line(), file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:  # failing: the one-line error says what happened
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            return
        self.close()


def progress(items: Iterable[T], desc: str, total: int | None = None,
             unit: str = "it") -> Iterator[T]:
    """Iterate with progress; ``total`` defaults to ``len(items)`` where it has one."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(total, desc, unit) as p:
        for x in items:
            yield x
            p.update()
