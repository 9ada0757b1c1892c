"""Order-independent means for the tables.

A float sum depends on the order of its terms, and a multi-threaded group-by adds in an order
that depends on the number of threads; so a table computed on a 2-core laptop and in a 1-CPU
Slurm job could differ in the last bit. Every mean that reaches a table goes through
:func:`fmean`, which sums with ``math.fsum`` (exactly rounded, hence order-independent), so
tables are byte-identical wherever they are computed (design: "Determinism").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np


def _values(values: Any) -> list[float]:
    if hasattr(values, "drop_nulls"):  # a polars Series: filter and convert in bulk
        s = values.drop_nulls()
        if s.dtype.is_float():
            s = s.filter(s.is_not_nan())
        return s.cast(float).to_list()  # int -> float is exact below 2**53
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        # a numpy array (the paired values of a comparison): filter and convert in bulk;
        # fsum is exactly rounded, so the list's order and origin do not matter
        x = values.astype(np.float64, copy=False).ravel()
        return x[~np.isnan(x)].tolist()
    return [float(v) for v in values if v is not None and not (isinstance(v, float)
                                                             and math.isnan(v))]


def fmean(values: Any) -> float | None:
    """Exactly rounded mean of the non-null values (None when there are none)."""
    if hasattr(values, "drop_nulls") and (values.dtype.is_integer()
                                          or str(values.dtype) == "Boolean"):
        # integer columns (indicators, counts): the int64 sum is exact, and int / int is
        # the correctly rounded quotient, which is what fsum(...) / n gives for sums below
        # 2**53 (the sum is exactly representable, so fsum returns it unrounded)
        s = values.drop_nulls()
        n = s.len()
        if not n:
            return None
        total = int(s.cast(int).sum())
        if abs(total) < 2 ** 53:
            return total / n
    vals = _values(values)
    return math.fsum(vals) / len(vals) if vals else None


def fstd(values: Iterable[float], ddof: int = 1) -> float | None:
    """Sample standard deviation from exactly rounded sums (None below ddof + 1 values)."""
    vals = _values(values)
    n = len(vals)
    if n <= ddof:
        return None
    m = math.fsum(vals) / n
    return math.sqrt(math.fsum((v - m) ** 2 for v in vals) / (n - ddof))
