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
from containmentbench.errors import BenchError
from containmentbench.integrity import writer

WORKFLOWS = ("W1", "W2", "W3")


@dataclass(frozen=True, slots=True)
class Tool:
    """One catalog tool: its resource class and universe, and four tool-native operations
    in the order (read, search, write, distribute) with their Tier-1 verbs (App. B.2)."""

    name: str
    resource_class: str
    universe: str
    ops: tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]]
    logs_session: bool


CATALOG: tuple[Tool, ...] = (
    Tool("drive", "file", "files", (("files.get", "read"), ("files.list", "search"),
                                    ("files.update", "write"),
                                    ("permissions.create", "share")), False),
    Tool("docs", "document", "files", (("documents.get", "read"), ("documents.search", "search"),
                                       ("documents.batchUpdate", "write"),
                                       ("documents.createLink", "share")), False),
    Tool("slack", "channel", "channels", (("conversations.history", "read"),
                                          ("search.messages", "search"),
                                          ("chat.update", "write"),
                                          ("chat.postMessage", "share")), True),
    Tool("github", "repository", "repos", (("repos.getContent", "read"),
                                           ("search.code", "search"),
                                           ("repos.createOrUpdateFileContents", "write"),
                                           ("actions.createWorkflowDispatch", "invoke")), True),
    Tool("jira", "ticket", "tickets", (("issue.get", "read"), ("issue.search", "search"),
                                       ("issue.edit", "write"), ("issue.addWatcher", "invite")),
         True),
    Tool("crm", "crm_record", "records", (("contacts.get", "read"), ("contacts.search", "search"),
                                          ("contacts.update", "write"),
                                          ("contacts.export", "share")), False),
    Tool("email", "message", "mailboxes", (("messages.get", "read"), ("messages.list", "search"),
                                           ("drafts.create", "write"),
                                           ("messages.send", "share")), False),
)


@dataclass(frozen=True, slots=True)
class GenParams:
    workflows: tuple[str, ...] = WORKFLOWS
    days: int = 1
    users: int = 10_000                    # U
    agents: int = 100_000                  # A
    tools_min: int = 3                     # K in [3, 7]
    tools_max: int = 7
    files: int = 1_000_000                 # resources: 1e6 files, 1e3 repos, 1e2 channels
    repos: int = 1_000
    channels: int = 100
    tickets: int = 100_000                 # not in Table 4: tickets and CRM records
    records: int = 100_000
    delegations_per_day: int = 200_000     # D_day in [2e5, 2e6]
    events_min: int = 20                   # E_d in [20, 500]
    events_max: int = 500
    loops_w1: int = 50                     # loops per workflow 50/60/75
    loops_w2: int = 60
    loops_w3: int = 75
    overlap_rate: float = 0.25             # [10%, 40%]
    spawn_fanout: float = 3.0              # mean children [2, 5] (W2)
    spawn_depth: int = 2                   # depth [1, 4] (W2)
    retry_rate: float = 3.0                # mean retries per step [0, 10] (W3)
    backtrack_rate: float = 0.1            # W3 restarts per step
    coverage: float = 0.8                  # synthetic coverage
    bypass: float = 0.05                   # synthetic bypass probability
    trace_coverage_min: float = 0.6        # 60-80% of events carry trace/span ids, by tool
    trace_coverage_max: float = 0.8
    trace_propagation: float = 0.3         # W2 child continuing its parent's trace
    unbound_rate: float = 0.001
    hint_conflict_rate: float = 0.001
    external_share_rate: float = 0.05
    drift_rate: float = 0.05               # injected late high-impact expansion (§5.4)
    approval_rate: float = 0.5             # ... followed by an approval event
    seed: int = 0
    chunk_events: int = 1_000_000
    row_group_rows: int = 131_072

    def loops(self, workflow: str) -> int:
        return {"W1": self.loops_w1, "W2": self.loops_w2, "W3": self.loops_w3}[workflow]

    def validate(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise BenchError(f"{why} (got {getattr(self, name)!r})", field=name)
        bad = [w for w in self.workflows if w not in WORKFLOWS]
        need(not bad and bool(self.workflows), "workflows", "workflows must be W1, W2, W3")
        for name in ("days", "users", "agents", "files", "repos", "channels", "tickets",
                     "records", "delegations_per_day", "chunk_events", "row_group_rows"):
            need(getattr(self, name) >= 1, name, "must be >= 1")
        need(1 <= self.tools_min <= self.tools_max <= len(CATALOG), "tools_max",
             f"need 1 <= tools_min <= tools_max <= {len(CATALOG)}")
        need(1 <= self.events_min <= self.events_max, "events_max",
             "need 1 <= events_min <= events_max")
        need(1 <= self.spawn_depth <= 8, "spawn_depth", "must lie in [1, 8]")
        for name in ("spawn_fanout", "retry_rate"):
            need(getattr(self, name) >= 0, name, "must be >= 0")
        for name in ("overlap_rate", "backtrack_rate", "coverage", "bypass",
                     "trace_coverage_min", "trace_coverage_max", "trace_propagation",
                     "unbound_rate", "hint_conflict_rate", "external_share_rate", "drift_rate",
                     "approval_rate"):
            need(0.0 <= getattr(self, name) <= 1.0, name, "must lie in [0, 1]")
        need(self.bypass <= self.coverage, "bypass", "bypass must not exceed coverage")
        need(self.trace_coverage_min <= self.trace_coverage_max, "trace_coverage_max",
             "trace_coverage_min must not exceed trace_coverage_max")
        need(self.agents >= self.users, "agents", "need at least one agent per user")


def tree_size(p: GenParams) -> float:
    """E[delegations per W2 tree]: depth ~ U{1..spawn_depth}, Poisson(fanout) children."""
    sizes = [sum(p.spawn_fanout ** level for level in range(d + 1))
             for d in range(1, p.spawn_depth + 1)]
    return float(np.mean(sizes))


def mean_calls(p: GenParams, workflow: str) -> float:
    """E[tool calls per delegation] after clipping (seeded Monte Carlo, 20k draws)."""
    from containmentbench.cim.synth import draw_calls

    return float(draw_calls(derive_rng("cim-mean", workflow), 20_000, p, workflow).mean())


def tool_trace_coverage(p: GenParams) -> np.ndarray:
    """Per-tool share of events with trace context, fixed per seed (Table 4, 60-80%)."""
    rng = derive_rng("cim-tools", p.seed)
    return rng.uniform(p.trace_coverage_min, p.trace_coverage_max, size=len(CATALOG))


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    workflow: str
    day: int
    bucket: int
    user_lo: int
    user_hi: int


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
    from containmentbench.cim.synth import build_chunk

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
