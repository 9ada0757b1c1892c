"""A run directory (the folder holding ``traces/``, ``tables/`` and ``MANIFEST.json``) seen
from the reading side: find a rollout, load its events and edges, list its tables.

Every viewer (``show``, ``cases``, ``report``) goes through this module, so the per-model
layout (``results/<study>/<model_slug>/``) and the older ``results/<study>/`` work alike: a
run directory is recognized by its contents, never by its depth.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from containmentbench.errors import BenchError
from containmentbench.trace.io import read_table, shard_dirs

INDEX_COLUMNS = ["rollout_id", "scenario_id", "stage", "defense", "seed", "model", "backend",
                 "status"]


@dataclass(frozen=True)
class Rollout:
    """One rollout: its ``rollouts`` row, its events (by seq) and edges."""

    row: dict[str, Any]
    events: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    shard: Path

    @property
    def id(self) -> str:
        return str(self.row["rollout_id"])


class RunDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise BenchError("no such run directory", file=str(self.path))
        # unverified: the integrity audit (report/integrity.py) checks and reports checksums
        self.shards = shard_dirs(self.path / "traces", verify=False) \
            if (self.path / "traces").is_dir() else []
        if not self.shards:
            raise BenchError("run directory has no finished trace shards (traces/**/SHA256SUMS)",
                             file=str(self.path))
        self._index: dict[str, tuple[dict[str, Any], Path]] | None = None

    @property
    def index(self) -> dict[str, tuple[dict[str, Any], Path]]:
        """rollout_id -> (its key columns, shard folder)."""
        if self._index is None:
            idx: dict[str, tuple[dict[str, Any], Path]] = {}
            for d in self.shards:
                t = read_table(d / "rollouts.parquet", "rollouts", INDEX_COLUMNS)
                for row in t.to_pylist():
                    idx[row["rollout_id"]] = (row, d)
            self._index = idx
        return self._index

    def has(self, rollout_id: str) -> bool:
        return rollout_id in self.index

    def load(self, rollout_id: str) -> Rollout:
        if rollout_id not in self.index:
            raise BenchError(f"unknown rollout id '{rollout_id}'", file=str(self.path))
        shard = self.index[rollout_id][1]
        flt = pc.field("rollout_id") == rollout_id
        row = read_table(shard / "rollouts.parquet", "rollouts").filter(flt).to_pylist()[0]
        # validated like every trace read (schema version, columns), only its rows loaded
        events = read_table(shard / "events.parquet", "events", filters=flt) \
            .sort_by("seq").to_pylist()
        edges = read_table(shard / "edges.parquet", "edges", filters=flt).to_pylist()
        return Rollout(row, events, edges, shard)

    def load_many(self, ids: list[str]) -> Iterator[Rollout]:
        """The rollouts ``ids`` (in that order within each shard, shards in path order),
        reading each shard's tables once: the report's trace pages load a thousand rollouts
        from a few hundred shards."""
        by: dict[Path, list[str]] = {}
        for rid in ids:
            if rid not in self.index:
                raise BenchError(f"unknown rollout id '{rid}'", file=str(self.path))
            by.setdefault(self.index[rid][1], []).append(rid)
        for shard in sorted(by):
            want = by[shard]
            flt = pc.field("rollout_id").isin(want)
            rows = {r["rollout_id"]: r for r in read_table(shard / "rollouts.parquet",
                                                           "rollouts").filter(flt).to_pylist()}
            events: dict[str, list[dict[str, Any]]] = {rid: [] for rid in want}
            for e in read_table(shard / "events.parquet", "events", filters=flt).to_pylist():
                events[e["rollout_id"]].append(e)
            edges: dict[str, list[dict[str, Any]]] = {rid: [] for rid in want}
            for e in read_table(shard / "edges.parquet", "edges", filters=flt).to_pylist():
                edges[e["rollout_id"]].append(e)
            for rid in want:
                yield Rollout(rows[rid], sorted(events[rid], key=lambda e: e["seq"]),
                              edges[rid], shard)


def find_run_dir(rollout_id: str, study: str | Path | None,
                 results: str | Path = "results") -> RunDir:
    """The run directory holding ``rollout_id``: ``--run-dir`` when given, otherwise the one run
    directory below ``results/`` that holds it."""
    if study is not None:
        run = RunDir(study)
        if not run.has(rollout_id):
            raise BenchError(f"unknown rollout id '{rollout_id}'", file=str(study))
        return run
    root = Path(results)
    candidates = sorted({p.parent for p in root.glob("*/MANIFEST.json")}
                        | {p.parent for p in root.glob("*/*/MANIFEST.json")}
                        | {p.parent for p in root.glob("*/traces")}
                        | {p.parent for p in root.glob("*/*/traces")})
    for c in candidates:
        try:
            run = RunDir(c)
        except BenchError:
            continue
        if run.has(rollout_id):
            return run
    raise BenchError(f"unknown rollout id '{rollout_id}' (no run directory below {root} "
                     "holds it; pass --run-dir DIR)", file=str(root))
