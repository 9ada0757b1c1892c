"""Both cores for the resampled intervals (the bulk of ``analyze`` on a large table).

Each interval's seed is derived from its key (``Settings.seed_for``), so intervals are
independent of the order and the process they are computed in. The parent builds every
comparison's inputs from the metrics frame (polars, already multi-threaded), then the pair
and cluster bootstraps (numpy, single-threaded and GIL-bound in their per-batch Python
loop) run in a pool of worker processes; the results are assembled in configuration order,
so tables are byte-identical for any number of workers. Workers are spawned, never forked:
forking a process that runs polars' thread pool can deadlock.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import polars as pl

from containmentbench.analysis.paired import (
    Comparison,
    Draws,
    Settings,
    cluster_interval,
    compare_draws,
    finish,
    pair_interval,
)

#: below this many resampled values in all, a pool costs more than it saves
MIN_PARALLEL_WORK = 2_000_000


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def compare_many(df: pl.DataFrame, specs: Sequence[Mapping[str, Any]], s: Settings,
                 workers: int | None = None) -> list[Comparison]:
    """``compare`` of every spec (``a``, ``b``, ``metric``, ``stage``), in order."""
    draws = [compare_draws(df, sp["a"], sp["b"], sp["metric"], sp["stage"], s) for sp in specs]
    todo = [w for w in draws if isinstance(w, Draws)]
    workers = available_cores() if workers is None else workers
    work = sum(len(w.va) for w in todo) * s.resamples
    if workers <= 1 or len(todo) < 2 or work < MIN_PARALLEL_WORK:
        done = {id(w): finish(w, pair_interval(w), cluster_interval(w)) for w in todo}
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, 2 * len(todo)), mp_context=ctx) as pool:
            # largest first, so the last task to finish is a short one
            order = sorted(todo, key=lambda w: -len(w.va))
            pis = {id(w): pool.submit(pair_interval, w) for w in order}
            cis = {id(w): pool.submit(cluster_interval, w) for w in order}
            done = {id(w): finish(w, pis[id(w)].result(), cis[id(w)].result()) for w in todo}
    return [w if isinstance(w, Comparison) else done[id(w)] for w in draws]
