"""A study's results as data frames (polars; ``.to_pandas()`` gives pandas).

    from containmentbench import results

    r = results.load("results/full_main/sim-default")
    r.results    # tables/results.parquet: every number of every table, one tidy row each
    r.metrics    # metrics/rollout_metrics.parquet: one row per rollout (glossary keys)
    r.rollouts   # the traces: one row per rollout ...
    r.events     # ... per logged node (model call, proposal, decision, commit, ...)
    r.edges      # ... per edge of the trace graph
    r.headline   # tables/headline.json: the findings and the sentences
    r.throughput # tables/throughput.parquet: rollouts/h, calls and tokens/s (wall clock)
    r.table("table12_claim_critical")   # any table of tables/ as a frame

    results.compare(r, "taint_only_v1", "structured_guard", "committed_harm", "security")

``compare`` gives any paired comparison on demand (eq. 12, §6.5), with the run's own
analysis settings, as one record in the vocabulary of ``results.parquet`` (``estimate`` = b - a,
``ci_low``/``ci_high`` its scenario-cluster interval, ``n`` pairs, ``n_clusters``):
``analysis/on_demand.py``.

A run directory is ``results/<study>/<model>/``; ``runs(study_dir)`` lists them. The traces
are many Parquet files, one set per shard (``traces/<model>/<defense>/seed=<s>/<stage>/
shard-<k>/``, each folder with a ``SHA256SUMS`` sidecar that is not Parquet): ``events`` and
the others read every shard's file of that name, and ``scan(name)`` gives the lazy frame.

Frozen bytes only: the manifest is checked as ``verify`` checks it before anything is read
(``integrity/reading.py``: with a key its MAC; a frozen study whose ``MANIFEST.json`` is gone
and a manifest that lists no files are refused), and a table, the metrics or a trace file
that the manifest does not list with its sha256 is refused, one line (``BenchError``). Files
are read the safe way (``integrity/safeopen.py``: no link, no FIFO or device).
``require_frozen=True`` refuses an unfrozen study too. Nothing here writes.
"""

from __future__ import annotations

import io
import json
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.errors import BenchError

TRACE_TABLES = ("rollouts", "events", "edges")
#: the largest file a study's reader takes (a trace table of one shard, the metrics)
LIMIT = 4 << 30


class Study:
    """One run directory's results, each frame read on first use."""

    def __init__(self, path: str | Path, require_frozen: bool = False) -> None:
        self.path = Path(path)
        if not (self.path / "metrics" / "rollout_metrics.parquet").is_file():
            hint = "" if not runs(self.path) else (
                f" (a study folder: its run directories are "
                f"{', '.join(p.name for p in runs(self.path))})")
            raise BenchError(f"not a run directory: no metrics/rollout_metrics.parquet{hint}",
                             file=str(self.path))
        from containmentbench.integrity import reading
        from containmentbench.integrity.keys import load_key

        man = reading.checked(self.path, load_key(self.path), require_manifest=True)
        if require_frozen and man is None:
            raise BenchError("no MANIFEST.json: the study is not frozen", file=str(self.path))
        self.frozen = man is not None
        self._files: dict[str, str] = man[0]["files"] if man is not None else {}

    def _bytes(self, rel: str) -> bytes:
        """The bytes of ``rel``, which must be the frozen ones when the study is frozen."""
        import hashlib

        from containmentbench.integrity import safeopen

        p = self.path / rel
        if not p.is_file():
            raise BenchError(f"no {rel} in this study", file=str(self.path))
        data = safeopen.read_bytes(p, limit=LIMIT, what=rel, follow=False, within=self.path)
        if self.frozen and self._files.get(rel) != hashlib.sha256(data).hexdigest():
            why = "is not listed in" if rel not in self._files else "sha256 differs from"
            raise BenchError(f"{rel}: {why} MANIFEST.json; refusing it (containmentbench "
                             f"verify {self.path} names every change)", file=str(p))
        return data

    def _checked(self, rel: str) -> Path:
        """The file ``rel`` (for a reader that opens it itself), checked as :meth:`_bytes`."""
        self._bytes(rel)
        return self.path / rel

    @cached_property
    def results(self) -> pl.DataFrame:
        return pl.read_parquet(io.BytesIO(self._bytes("tables/results.parquet")))

    @cached_property
    def metrics(self) -> pl.DataFrame:
        return pl.read_parquet(io.BytesIO(self._bytes("metrics/rollout_metrics.parquet")))

    @cached_property
    def headline(self) -> dict[str, Any]:
        return json.loads(self._bytes("tables/headline.json"))

    @cached_property
    def throughput(self) -> pl.DataFrame | None:
        """``tables/throughput.parquet``: rollouts per hour, model calls and tokens per second
        and the prefix-cache hit rate per rollout job and for the study, in
        ``results.parquet``'s columns plus ``job`` (null: the study). Wall clock, so kept
        beside ``results`` rather than in it (``analysis/throughput.py``); None for a study
        without job records."""
        if not (self.path / "tables" / "throughput.parquet").is_file():
            return None
        return pl.read_parquet(io.BytesIO(self._bytes("tables/throughput.parquet")))

    @cached_property
    def analysis(self) -> dict[str, Any]:
        """``analysis.json``: what ``analyze`` computed and the settings it used."""
        return json.loads(self._bytes("analysis.json"))

    def table(self, name: str) -> pl.DataFrame:
        """``tables/<name>.parquet`` (or ``figures/<name>.parquet`` for a figure source)."""
        from containmentbench.integrity.paths import check_name

        check_name(name, "name")
        rel = f"tables/{name}.parquet"
        if not (self.path / rel).is_file() and (self.path / f"figures/{name}.parquet").is_file():
            rel = f"figures/{name}.parquet"
        return pl.read_parquet(io.BytesIO(self._bytes(rel)))

    def files(self, name: str) -> list[Path]:
        """Every shard's ``<name>.parquet`` (``rollouts``, ``events``, ``edges``, ...)."""
        from containmentbench.trace.io import shard_dirs

        if name not in (*TRACE_TABLES, "timings", "adapter_labels"):
            raise BenchError(f"unknown trace table '{name}' (known: "
                             f"{', '.join(TRACE_TABLES)}, timings)", field="name")
        out = [d / f"{name}.parquet" for d in shard_dirs(self.path / "traces", verify=False)]
        out = [p for p in out if p.is_file()]
        if name != "timings":  # wall-clock files are never hashed (freeze/manifest.py)
            for p in out:
                self._checked(p.relative_to(self.path).as_posix())
        return out

    def scan(self, name: str) -> pl.LazyFrame:
        return pl.scan_parquet(self.files(name))

    @cached_property
    def rollouts(self) -> pl.DataFrame:
        return self.scan("rollouts").collect()

    @cached_property
    def events(self) -> pl.DataFrame:
        return self.scan("events").collect()

    @cached_property
    def edges(self) -> pl.DataFrame:
        return self.scan("edges").collect()


def load(path: str | Path, require_frozen: bool = False) -> Study:
    """The results of the run directory ``path`` (``results/<study>/<model>/``)."""
    return Study(path, require_frozen)


def compare(run: Study | str | Path, a: str, b: str, metric: str, stage: str = "all"
            ) -> dict[str, Any]:
    """Defense ``b`` against defense ``a`` on ``metric`` in ``stage`` (``all``: every stage
    where the metric is defined) for the run ``run`` (a loaded :class:`Study` or a run
    directory): the paired delta b - a over (scenario, model, seed) pairs (eq. 12) with its
    scenario-cluster and pair 95% intervals (§6.5) and the paired win rate, resampled with the
    run's own analysis settings, so a configured pair gives its Table 12/25 numbers. One
    record: ``estimate``, ``ci_low``, ``ci_high`` (cluster), ``pair_ci_low``,
    ``pair_ci_high``, ``n`` (pairs), ``n_clusters``, ``win_rate``, ``sim_agent``, ...
    An unknown defense, metric or stage is a one-line ``BenchError``."""
    from containmentbench.analysis.on_demand import comparison

    study = run if isinstance(run, Study) else load(run)
    cfg = study.analysis.get("config")
    if not isinstance(cfg, dict):
        raise BenchError("analysis.json has no analysis config (run analyze first)",
                         file=str(study.path / "analysis.json"), field="config")
    return comparison(study.metrics, cfg, a, b, metric, stage)


def runs(study: str | Path) -> list[Path]:
    """The run directories of a study folder (``results/<study>/``), one per model."""
    root = Path(study)
    return sorted(p.parents[1] for p in root.glob("*/metrics/rollout_metrics.parquet"))
