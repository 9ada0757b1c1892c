"""Bounded ``type=`` converters for every numeric command-line flag.

A bare ``type=int`` accepts ``--seed -1``, ``--limit -1`` (which ran the whole suite in
reverse), ``--top-p 2`` or ``--width -5``; every numeric flag of every verb takes one of these
instead (``tests/cli/test_argtypes.py`` walks the parsers and fails on a bare ``int`` or
``float``). Where a flag sets a quantity of the study config its range is the config's own
(``config/bounds.py``), so ``--window 0`` and ``backend.window=0`` are refused alike. argparse
turns the ``ArgumentTypeError`` into one line naming the flag, exit 2, before the verb runs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(text: str, kind: type) -> int | float:
    # a ValueError lets argparse say "invalid int value: 'abc'" (the converter's __name__)
    value = kind(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(text)  # nan or inf: no range holds them
    return value


def _ranged(kind: type, lo: float | None, hi: float | None, name: str,
            open_lo: bool = False, open_hi: bool = False) -> Callable[[str], int | float]:
    def convert(text: str) -> int | float:
        v = _number(text, kind)
        if (lo is not None and (v < lo or (open_lo and v == lo))) or \
                (hi is not None and (v > hi or (open_hi and v == hi))):
            left = "-inf" if lo is None else lo
            right = "inf" if hi is None else hi
            raise argparse.ArgumentTypeError(
                f"{text} is out of range {'(' if open_lo else '['}{left}, {right}"
                f"{')' if open_hi else ']'}")
        return v
    convert.__name__ = name  # argparse names the converter in its own messages
    # read by the flag audit (tests/cli/test_argtypes.py)
    convert.bounds = (lo, hi)  # type: ignore[attr-defined]
    convert.open = (open_lo, open_hi)  # type: ignore[attr-defined]
    return convert


def int_range(lo: int | None, hi: int | None = None) -> Callable[[str], int | float]:
    return _ranged(int, lo, hi, "int")


def float_range(lo: float | None, hi: float | None = None, *, open_lo: bool = False,
                open_hi: bool = False) -> Callable[[str], int | float]:
    return _ranged(float, lo, hi, "float", open_lo, open_hi)


def config_range(key: str, kind: type = int) -> Callable[[str], int | float]:
    """A flag that sets ``key`` of the study config: the config's range (config/bounds.py)."""
    from containmentbench.config.bounds import BOUNDS

    lo, hi = BOUNDS[key]
    return _ranged(kind, lo, hi, kind.__name__)


positive_int = int_range(1)
non_negative_int = int_range(0)
seed = config_range("study.seeds")
workers = config_range("workers")
resamples = config_range("analysis.resamples")
probability = float_range(0.0, 1.0)
