"""Worst-case time of every regular expression that reads benchmark or model text (issue 22,
"Hostile text").

For each use of ``tests/regex_catalog.py`` (a pattern applied the way the code applies it):
every adversarial text of the catalog is timed at ``--probe`` characters, the three slowest
again at ``--size`` (1 MB by default); the slowest is printed with its throughput. The uses
whose pattern was rewritten are then measured side by side with the old pattern (kept here
only) on the old pattern's worst text, at growing sizes until the old one takes longer than
``--old-limit`` seconds: the ratio grows with the size for a quadratic old pattern.

Times are CPU seconds of this process (``time.process_time``), so a loaded machine shows
about the same figures.

    PYTHONPATH=. python bench/regex_worst_case.py [--size 1048576] [--old-limit 10]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.regex_catalog import USES, Use, adversarial  # noqa: E402

# The patterns this issue replaced, as they were, and how the code applied them.
OLD: dict[str, Callable[[str], object]] = {
    "containmentbench.report.integrity.email_domains":
        re.compile(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)").findall,
    "containmentbench.attacks.mutation.template_body":
        re.compile(r"<template>(.*?)</template>", re.S).search,
}


def cpu(f: Callable[[str], object], text: str) -> float:
    t0 = time.process_time()
    f(text)
    return time.process_time() - t0


def worst(use: Use, probe: int, size: int) -> tuple[float, str]:
    timed = sorted(((cpu(use.run, make(probe)), label, make) for label, make in
                    adversarial(use)), key=lambda x: x[0])
    return max((cpu(use.run, make(size)), label) for _, label, make in timed[-3:])


def side_by_side(use: Use, old: Callable[[str], object], limit: float) -> None:
    # the old pattern's worst text at 2 KB (it is quadratic: its worst is found small)
    label, make = max(adversarial(use), key=lambda lm: cpu(old, lm[1](2048)))
    print(f"  {use.name.rsplit('.', 1)[-1]}: old vs new on {label!r}")
    size = 2048
    while True:
        text = make(size)
        t_old, t_new = cpu(old, text), cpu(use.run, text)
        print(f"    {size:>8} chars  old {t_old * 1e3:10.1f} ms  new {t_new * 1e3:8.3f} ms  "
              f"ratio {t_old / max(t_new, 1e-6):10.0f}x", flush=True)
        if t_old > limit or size >= 1 << 20:
            break
        size *= 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1 << 20, help="characters per worst text")
    ap.add_argument("--probe", type=int, default=1 << 14, help="characters while searching")
    ap.add_argument("--old-limit", type=float, default=10.0,
                    help="stop doubling once the old pattern takes this many CPU seconds")
    args = ap.parse_args()
    print(f"worst case per use at {args.size} characters (CPU time; the slowest of the "
          f"catalog's adversarial texts)")
    for use in USES:
        t, label = worst(use, args.probe, args.size)
        rate = args.size / max(t, 1e-9) / 1e6
        print(f"  {use.name:<72} {t * 1e3:9.1f} ms  {rate:8.1f} Mchar/s  worst {label!r}",
              flush=True)
    print("\nrewritten patterns, measured side by side with the old ones")
    for use in USES:
        if use.name in OLD:
            side_by_side(use, OLD[use.name], args.old_limit)


if __name__ == "__main__":
    main()
