"""Both cores for the resampled intervals (the bulk of ``analyze`` on a large table).

Each interval's seed is derived from its key (``Settings.seed_for``), so intervals are
independent of the order and the process they are computed in. The parent builds every
interval's inputs from the metrics frame (polars, already multi-threaded), then the pair
and cluster bootstraps (numpy, single-threaded) run in a pool of worker processes while the
parent goes on with the deterministic tables; the results are assembled in configuration
order, so tables are byte-identical for any number of workers. Workers are spawned, never
forked: forking a process that runs polars' thread pool can deadlock.

One :class:`IntervalPool` serves a whole ``analyze`` (comparisons, divergence and figure
intervals), so the workers start once and stay busy across the parts.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from functools import partial
from typing import Any

import polars as pl

from containmentbench.analysis.bootstrap import cluster_bootstrap, cluster_codes
from containmentbench.analysis.paired import (
    Comparison,
    Draws,
    Settings,
    cluster_interval,
    compare_draws,
    finish,
    pair_interval,
)
from containmentbench.metrics.glossary import ALL

#: below this many resampled values in all (rows per defense x intervals x resamples), two
#: spawned workers (~1 s of start-up each) cost more than they save: full_main (2,520 rows
#: per defense, ~1.2e9) analyzes in 1.8 s in process and 4.1 s with a pool; 10^6 rows
#: (~7e10) spend ~50 s of CPU resampling
MIN_PARALLEL_WORK = 5_000_000_000


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class _Now:
    """A result computed in this process when first asked for (the one-worker path)."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._fn, self._args, self._done, self._value = fn, args, False, None

    def result(self) -> Any:
        if not self._done:
            self._value, self._done = self._fn(*self._args), True
            self._fn = self._args = None  # type: ignore[assignment]  (free the inputs)
        return self._value


def _ready() -> None:
    """A worker's first task: importing this module loads the bootstrap (numpy, polars)."""


class IntervalPool:
    """Runs interval functions on ``workers`` spawned processes (started on the first
    submission), or in this process, lazily, when ``workers <= 1``. ``submit`` returns an
    object with ``result()``; a function and its arguments must be picklable."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = available_cores() if workers is None else max(1, workers)
        self._pool: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self.workers > 1

    def start(self) -> IntervalPool:
        """Spawn the workers now, so their start-up (interpreter, numpy) overlaps with the
        parent building the first intervals' inputs."""
        if self.parallel and self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers,
                                             mp_context=multiprocessing.get_context("spawn"))
            for _ in range(self.workers):  # each submission spawns one idle-less worker
                self._pool.submit(_ready)
        return self

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future | _Now:
        if not self.parallel:
            return _Now(fn, args)
        return self.start()._pool.submit(fn, *args)  # type: ignore[union-attr]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> IntervalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PendingCI:
    """A mean's interval submitted to the pool; ``get()`` waits for it and gives the
    estimate, its interval and the rollouts and scenario clusters behind it (the values
    the mean is over, nulls left out: Table 5), so a table's n is that of its estimate."""

    def __init__(self, job: Any, n: int = 0, n_clusters: int = 0) -> None:
        self.job, self.n, self.n_clusters = job, n, n_clusters

    def get(self) -> dict[str, float | int | None]:
        count = {"n": self.n, "n_clusters": self.n_clusters}
        if self.job is None:
            return {"estimate": None, "ci_low": None, "ci_high": None, **count}
        ci = self.job.result()
        return {"estimate": ci.estimate, "ci_low": ci.low, "ci_high": ci.high, **count}


def quantity_key(defense: str, col: str, stages: str | Sequence[str]) -> tuple[str, ...]:
    """The seed key of a defense's mean of ``col`` over ``stages`` (``all``, a stage, or a
    tuple of stages): one key per quantity, whichever table or figure draws its interval,
    so the same quantity carries the same interval in every table (findings, exposure and
    validity, the figures' sources). The paper is silent on seeding; this is our choice."""
    if not isinstance(stages, str):
        stages = "all" if tuple(stages) == ALL else "+".join(stages)
    return ("quantity", defense, col, stages)


def cluster_ci(sub: pl.DataFrame, col: str, s: Settings, pool: IntervalPool,
               *key: Any) -> PendingCI:
    """Mean and scenario-cluster 95% interval of ``col`` (None when undefined; §6.5: all
    seeds of a resampled scenario are kept), resampled on ``pool``; the seed comes from
    ``key``, so the interval does not depend on when or where it is drawn."""
    sub = sub.select(col, "cluster_id").filter(pl.col(col).is_not_null())
    if sub.height == 0:
        return PendingCI(None)
    v = sub[col].cast(pl.Float64).to_numpy()
    return PendingCI(pool.submit(partial(
        cluster_bootstrap, v, cluster_codes(sub["cluster_id"]), n_resamples=s.resamples,
        confidence=s.confidence, seed=s.seed_for(*key))), sub.height,
        sub["cluster_id"].n_unique())


def resolve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every pending interval replaced by its estimate, low, high, n and
    n_clusters."""
    out = []
    for r in rows:
        flat: dict[str, Any] = {}
        for k, v in r.items():
            if isinstance(v, PendingCI):
                flat.update(v.get())
            else:
                flat[k] = v
        out.append(flat)
    return out


def submit_many(df: pl.DataFrame, specs: Sequence[Mapping[str, Any]], s: Settings,
                pool: IntervalPool) -> Callable[[], list[Comparison]]:
    """Submit the intervals of every spec (``a``, ``b``, ``metric``, ``stage``); the
    returned function waits for them and gives the comparisons in spec order."""
    draws = [compare_draws(df, sp["a"], sp["b"], sp["metric"], sp["stage"], s) for sp in specs]
    todo = [w for w in draws if isinstance(w, Draws)]
    # largest first, so the last task to finish is a short one
    order = sorted(todo, key=lambda w: -len(w.va))
    pis = {id(w): pool.submit(pair_interval, w) for w in order}
    cis = {id(w): pool.submit(cluster_interval, w) for w in order}

    def collect() -> list[Comparison]:
        done = {id(w): finish(w, pis[id(w)].result(), cis[id(w)].result()) for w in todo}
        return [w if isinstance(w, Comparison) else done[id(w)] for w in draws]

    return collect


def compare_many(df: pl.DataFrame, specs: Sequence[Mapping[str, Any]], s: Settings,
                 workers: int | None = None, pool: IntervalPool | None = None
                 ) -> list[Comparison]:
    """``compare`` of every spec (``a``, ``b``, ``metric``, ``stage``), in order; on the
    given pool, else on a pool of its own when the work is worth one."""
    if pool is not None:
        return submit_many(df, specs, s, pool)()
    with pool_for(df, len(specs), s.resamples, workers) as own:
        return submit_many(df, specs, s, own)()


def pool_for(df: pl.DataFrame, n_intervals: int, resamples: int,
             workers: int | None = None) -> IntervalPool:
    """A pool of ``workers`` (default: available cores) when the work is worth one, else
    the in-process pool. A rough size (rows per defense x intervals x resamples) decides
    before any input is built; where the intervals run never changes them."""
    workers = available_cores() if workers is None else workers
    n_def = max(1, df["defense"].n_unique()) if "defense" in df.columns else 1
    work = n_intervals * (df.height / n_def) * resamples
    return IntervalPool(workers if n_intervals >= 2 and work >= MIN_PARALLEL_WORK else 1
                        ).start()
