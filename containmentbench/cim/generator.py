"""Seeded synthetic delegation telemetry (paper 002 §7.1, Table 4; workflows W1-W3 of §7.2.1).

``GenParams`` holds the Table 4 parameters (defaults: the paper's artifact settings at the
low end of each range). The output is a CIM store (store.py): events stream to
hive-partitioned Parquet, one file per (workflow, day, bucket), written chunk by chunk so
memory is bounded by ``chunk_events`` whatever the day's size; the side table is appended
per chunk. Ground truth stays in the data for evaluation (``gt_delegation_id``,
``covered``/``capture``; ``gt_drift``/``gt_approved`` in the side table), §7.2.3.

Interpretations of Table 4 (documented in docs/cim.md):

* ``delegations_per_day`` counts every delegation, children included (W2 trees);
* ``loops`` (W1/W2/W3 = 50/60/75) is the mean tool calls per delegation before clipping
  to [events_min, events_max] (the "event scaling" row);
* ``overlap_rate``: share of users whose delegations run in concurrent bursts (>= 2 at once,
  sharing the agent runtime when they use the same agent); other users run one at a time;
* ``coverage``: share of calls on gateway-mediated tools; ``bypass``: share of calls that go
  around the gateway out of band; so P(gateway) = coverage - bypass (0.75 by default);
* ``trace_coverage``: each tool carries trace/span ids on a fixed share of its events,
  drawn once per seed in the range; ``unbound_rate``: gateway calls without valid context.

Buckets partition users, so each bucket is a self-contained run for the baselines (every
user's events are in one file). Each chunk has its own RNG stream keyed by (seed, workflow,
day, bucket), so output bytes do not depend on ``jobs``.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from containmentbench.canonical import derive_rng
from containmentbench.cim.catalog import (  # noqa: F401  (re-exported: the generator's API)
    CATALOG,
    WORKFLOWS,
    ChunkSpec,
    GenParams,
    Tool,
    tree_size,
)
from containmentbench.cim.synth import build_chunk, draw_calls
from containmentbench.errors import BenchError
from containmentbench.integrity import writer


def mean_calls(p: GenParams, workflow: str) -> float:
    """E[tool calls per delegation] after clipping (seeded Monte Carlo, 20k draws)."""
    return float(draw_calls(derive_rng("cim-mean", workflow), 20_000, p, workflow).mean())


def tool_trace_coverage(p: GenParams) -> np.ndarray:
    """Per-tool share of events with trace context, fixed per seed (Table 4, 60-80%)."""
    rng = derive_rng("cim-tools", p.seed)
    return rng.uniform(p.trace_coverage_min, p.trace_coverage_max, size=len(CATALOG))


def plan(p: GenParams) -> list[ChunkSpec]:
    """Chunks in write order; buckets split users so each holds ~chunk_events rows."""
    out = []
    for w in p.workflows:
        rows = p.delegations_per_day * (mean_calls(p, w) + 1.0)
        n_buckets = max(1, min(p.users, math.ceil(rows / p.chunk_events)))
        edges = np.linspace(0, p.users, n_buckets + 1).astype(np.int64)
        for day in range(p.days):
            for b in range(n_buckets):
                out.append(ChunkSpec(w, day, b, int(edges[b]), int(edges[b + 1])))
    return out


def _run_chunk(args: tuple[GenParams, ChunkSpec, str, bool, bytes | None]
               ) -> tuple[Any, dict[str, Any]]:
    from containmentbench.cim.chain import add_chain
    from containmentbench.cim.store import partition_path, write_events

    p, spec, root, chain, key = args
    writer.adopt(Path(root))  # a worker process writes into the store being built
    rel = partition_path(spec.workflow, spec.day, spec.bucket)
    events, side, stats = build_chunk(p, spec, tool_trace_coverage(p), rel)
    head = None
    if chain:
        events = add_chain(events, key)
        head = events.column("chain_hash")[-1].as_py() if events.num_rows else None
    stats["bytes"] = write_events(Path(root), rel, events, row_group_rows=p.row_group_rows)
    return side, {"stats": stats, "rel": rel, "head": head}


def _one_thread() -> None:
    """Worker processes already use every core; Arrow's own pools would oversubscribe them."""
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


@dataclass(frozen=True, slots=True)
class GenSummary:
    out: Path
    n_events: int
    n_delegations: int
    n_files: int
    bytes: int
    seconds: float

    @property
    def events_per_s(self) -> float:
        return self.n_events / self.seconds if self.seconds else float("nan")

    @property
    def bytes_per_event(self) -> float:
        return self.bytes / max(self.n_events, 1)


def generate(p: GenParams, out: Path, *, jobs: int = 1, chain: bool = False,
             progress: bool = False, force: bool = False) -> GenSummary:
    """Stream a synthetic store to ``out`` (an earlier store is replaced only with ``force``
    and kept aside, cim/seal.py); deterministic bytes for a seed."""
    from containmentbench.cim.seal import begin_store, finish_store, seal_manifest
    from containmentbench.cim.store import DelegationWriter, event_files, write_manifest
    from containmentbench.integrity.keys import load_key

    p.validate()
    if not 1 <= jobs <= 1024:
        raise BenchError("must lie in [1, 1024]", field="jobs")
    key = load_key(out) if chain else None
    final, out = out, begin_store(out, force)
    chunks = plan(p)
    t0 = time.perf_counter()
    dw = DelegationWriter(out)
    totals: dict[str, int] = {}
    tasks = [(p, c, str(out), chain, key) for c in chunks]
    heads: dict[str, str] = {}
    if jobs == 1:
        results = map(_run_chunk, tasks)
        pool = None
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"),
                                   initializer=_one_thread)
        results = pool.map(_run_chunk, tasks)
    try:
        for i, (side, res) in enumerate(results):
            dw.write(side)
            stats = res["stats"]
            if res["head"] is not None:
                heads[res["rel"]] = res["head"]
            for k, v in stats.items():
                totals[k] = totals.get(k, 0) + v
            if progress:
                el = time.perf_counter() - t0
                eta = el * (len(chunks) - i - 1) / (i + 1)
                print(f"  chunk {i + 1}/{len(chunks)}: {totals['n_rows']:,} events, "
                      f"{totals['n_rows'] / el:,.0f} events/s, elapsed {el:.0f} s, "
                      f"ETA {eta:.0f} s", flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
    dw.close()
    seconds = time.perf_counter() - t0
    cov = tool_trace_coverage(p)
    write_manifest(out, seal_manifest({
        "producer": "cim generate", "params": asdict(p),
        "tool_trace_coverage": {t.name: round(float(c), 4) for t, c in zip(CATALOG, cov)},
        "n_files": len(chunks), "n_delegations": dw.rows, **totals,
        "chain": chain, "chain_heads": heads,
        "bytes_per_event": round(totals.get("bytes", 0) / max(totals.get("n_rows", 1), 1), 2)},
        event_files(out), key))
    finish_store(out, final, force)
    return GenSummary(final, totals.get("n_rows", 0), dw.rows, len(chunks),
                      totals.get("bytes", 0), seconds)
