"""Structural checks of a shard's trace tables on read (paper 000 eq. 1).

Every per-rollout list the metrics build indexes events by ``seq`` (``tainted[p["seq"]]``) and
walks edges forward in one pass (cascade depth), so a reader must refuse a shard whose
numbering or edge direction breaks those assumptions instead of computing a wrong value:

* events of a rollout are contiguous in the file and numbered ``0..n-1`` in file order
  (sorted, no gap, no duplicate);
* every edge of a rollout points forward (``src < dst``) between events that exist.

Vectorized with pyarrow and numpy only: readers run in worker processes forked after the
parent may have used polars, whose thread pool does not survive a fork.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.errors import SchemaError


def check_events(events: pa.Table, path: str) -> dict[str, int]:
    """Raise on the first rollout whose events are not numbered 0..n-1 in order; return the
    event count per rollout."""
    n = events.num_rows
    if n == 0:
        return {}
    enc = pc.dictionary_encode(events.column("rollout_id")).combine_chunks()
    idx = enc.indices.to_numpy()
    names = enc.dictionary.to_pylist()
    seq = events.column("seq").to_numpy()
    start = np.flatnonzero(np.concatenate(([True], idx[1:] != idx[:-1])))
    if len(start) != len(names):
        runs = np.bincount(idx[start], minlength=len(names))
        bad = names[int(np.flatnonzero(runs > 1)[0])]
        raise SchemaError(f"rollout '{bad}': events are not contiguous in the file",
                          file=path, field="rollout_id")
    run_len = np.diff(np.append(start, n))
    pos = np.arange(n) - np.repeat(start, run_len)
    wrong = np.flatnonzero(seq != pos)
    if len(wrong):
        i = int(wrong[0])
        raise SchemaError(f"rollout '{names[idx[i]]}': event at position {int(pos[i])} has "
                          f"seq {int(seq[i])} (events must be numbered 0..n-1 in order)",
                          file=path, field="seq")
    return {names[idx[s]]: int(k) for s, k in zip(start, run_len)}


def check_edges(edges: pa.Table, counts: dict[str, int], path: str) -> None:
    """Raise on the first edge that points backward, loops, or names a missing event."""
    if edges.num_rows == 0:
        return
    rids = list(counts)
    where = pc.index_in(edges.column("rollout_id"), value_set=pa.array(rids, pa.string()))
    where = where.combine_chunks() if isinstance(where, pa.ChunkedArray) else where
    missing = where.is_null().to_numpy(zero_copy_only=False)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise SchemaError(f"rollout '{edges.column('rollout_id')[i].as_py()}': has edges but "
                          f"no events", file=path, field="rollout_id")
    size = np.array([counts[r] for r in rids])[where.to_numpy(zero_copy_only=False)]
    src, dst = edges.column("src").to_numpy(), edges.column("dst").to_numpy()
    outside = (src < 0) | (dst >= size)
    backward = ~outside & (src >= dst)
    bad = np.flatnonzero(outside | backward)
    if len(bad):
        i = int(bad[0])
        rid = edges.column("rollout_id")[i].as_py()
        if backward[i]:
            raise SchemaError(f"rollout '{rid}': edge {src[i]} -> {dst[i]} points backward "
                              f"(edges must go forward in seq)", file=path, field="src")
        raise SchemaError(f"rollout '{rid}': edge {src[i]} -> {dst[i]} names an event "
                          f"outside 0..{size[i] - 1}", file=path, field="dst")


def check_shard(events: pa.Table, edges: pa.Table, events_path: str, edges_path: str) -> None:
    check_edges(edges, check_events(events, events_path), edges_path)
