"""The live CIM emitter at the gateway boundary (paper 002 §6, App. C.2 (4), C.4).

``LiveEmitter`` is the gateway's event emission: it sees every gateway-emitted event of a
running rollout at the moment the runtime records it (``tap`` wraps the episode's recorder,
so nothing in the runtime changes), projects it with the same ``Projector`` as the post-hoc
export (project.py) but with a wall clock, and hands rows to a sink in batches. The post-hoc
projection is kept as a cross-check: both must agree on every column but ``time`` (tested).

Log emission layer (C.4: "buffering, retry, and backpressure handling, decoupling capture
from storage"):

* buffering: rows collect in a buffer and leave as one Arrow batch per ``batch_rows``;
* retry: a batch the sink refuses (it raises) stays queued and is offered again at the next
  flush, oldest first;
* backpressure: at most ``max_pending`` batches wait; beyond that the policy decides —
  ``block`` retries the oldest batch up to ``block_retries`` times with doubling sleeps and
  then raises (capture stops rather than lose evidence), ``drop`` discards the oldest batch
  and counts its rows in ``n_dropped`` (loss is counted, never silent).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from containmentbench.cim.project import GATEWAY_KINDS, PROVIDER, Projector, rows_to_table
from containmentbench.errors import BenchError

Sink = Callable[[pa.Table], None]
POLICIES = ("block", "drop")


def wall_clock_us() -> int:
    return time.time_ns() // 1_000


class LiveEmitter:
    """Projects recorded events to CIM rows at capture time and emits them in batches."""

    def __init__(self, sink: Sink, *, batch_rows: int = 512, max_pending: int = 8,
                 policy: str = "block", block_retries: int = 5, backoff_s: float = 0.001,
                 provider: dict[str, str] | None = None,
                 clock: Callable[[], int] = wall_clock_us) -> None:
        if policy not in POLICIES:
            raise BenchError(f"unknown backpressure policy '{policy}' ({', '.join(POLICIES)})",
                             field="policy")
        if batch_rows < 1 or max_pending < 1:
            raise BenchError("batch_rows and max_pending must be >= 1", field="batch_rows")
        self.sink = sink
        self.batch_rows = batch_rows
        self.max_pending = max_pending
        self.policy = policy
        self.block_retries = block_retries
        self.backoff_s = backoff_s
        self.projector = Projector(lambda ev: clock(), provider)
        self.buffer: list[dict[str, Any]] = []
        self.pending: deque[pa.Table] = deque()
        self.stats = {"n_rows": 0, "n_batches": 0, "n_retries": 0, "n_dropped": 0,
                      "emit_ns": 0}

    def observe(self, event: dict[str, Any]) -> None:
        """One recorded trace event (any kind); gateway kinds become CIM rows."""
        t0 = time.perf_counter_ns()
        rows = self.projector.feed(event)
        if rows:
            self.buffer.extend(rows)
            if len(self.buffer) >= self.batch_rows:
                self.flush()
        self.stats["emit_ns"] += time.perf_counter_ns() - t0

    def flush(self) -> None:
        if self.buffer:
            self.pending.append(rows_to_table(self.buffer))
            self.stats["n_rows"] += len(self.buffer)
            self.buffer = []
        self._drain()
        while len(self.pending) > self.max_pending:
            if self.policy == "drop":
                self.stats["n_dropped"] += self.pending.popleft().num_rows
                continue
            for i in range(self.block_retries):
                time.sleep(self.backoff_s * 2 ** i)
                if self._offer():
                    break
            else:
                raise BenchError(f"CIM sink refused {len(self.pending)} batches "
                                 f"({self.block_retries} retries); capture stops",
                                 field="sink")

    def _offer(self) -> bool:
        try:
            self.sink(self.pending[0])
        except Exception:  # the sink's failure is retried, never lost (module docstring)
            self.stats["n_retries"] += 1
            return False
        self.pending.popleft()
        self.stats["n_batches"] += 1
        return True

    def _drain(self) -> None:
        while self.pending and self._offer():
            pass

    def close(self) -> None:
        self.buffer.extend(self.projector.close())
        self.flush()
        if self.pending:
            raise BenchError(f"CIM sink still refuses {len(self.pending)} batches at close",
                             field="sink")


def tap(episode: Any, emitter: LiveEmitter,
        cost: Callable[[str, int], None] | None = None) -> None:
    """Route every event the episode records through ``emitter`` at capture time.

    The episode's recorder becomes a subclass whose ``add`` records as before and then
    hands the stored event (with the columns a trace shard would give it) to the emitter;
    the recorded trace is unchanged. ``cost(rollout_id, ns)``, when given, receives the
    nanoseconds each hand-over took (building the event, projection, batching, any flush):
    the emission share of the gateway's added latency (micro.py)."""
    from containmentbench.trace.recorder import Recorder
    from containmentbench.trace.schema import EVENTS

    rec = episode.rec
    rid = episode.spec.rollout_id
    emitter.projector.provider.setdefault(rid, PROVIDER.get(episode.spec.backend,
                                                            episode.spec.backend))
    names = EVENTS.names
    wanted = frozenset((*GATEWAY_KINDS, "decision", "confirmation"))  # Projector.feed's kinds

    def emit(seq: int) -> None:
        t0 = time.perf_counter_ns()
        fields = rec.events[seq]
        if fields["kind"] not in wanted:  # model calls, results, ...: nothing to project
            if cost is not None:
                cost(rid, time.perf_counter_ns() - t0)
            return
        ev = {n: fields.get(n) for n in names}
        ev["rollout_id"], ev["event_id"] = rid, f"{rid}:{seq}"
        emitter.observe(ev)
        if cost is not None:
            cost(rid, time.perf_counter_ns() - t0)

    class _Tapped(Recorder):
        __slots__ = ()

        def add(self, kind: str, **kw: Any) -> int:
            seq = Recorder.add(self, kind, **kw)
            emit(seq)
            return seq

    # the episode already minted its entry agent while it was built: emit those now
    for seq in range(len(rec.events)):
        emit(seq)
    rec.__class__ = _Tapped
