"""Structural checks of a shard's trace tables on read (paper 000 eq. 1).

Every per-rollout list the metrics build indexes events by ``seq`` (``tainted[p["seq"]]``) and
walks edges forward in one pass (cascade depth), so a reader must refuse a shard whose
numbering or edge direction breaks those assumptions instead of computing a wrong value:

* events of a rollout are numbered ``0..n-1`` in file order (contiguous, sorted, no duplicate);
* every edge of a rollout points forward (``src < dst``) between events that exist.

Checks are vectorized (polars) so they cost little next to reading the shard.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from containmentbench.errors import SchemaError


def check_events(events: pa.Table, path: str) -> dict[str, int]:
    """Raise on the first rollout whose events are not numbered 0..n-1 in order; return the
    event count per rollout."""
    df = pl.from_arrow(events.select(["rollout_id", "seq"]))
    if df.height == 0:
        return {}
    df = df.with_row_index("row").with_columns(
        pl.int_range(pl.len()).over("rollout_id").alias("pos"),
        (pl.col("rollout_id") != pl.col("rollout_id").shift(1)).fill_null(True).alias("start"))
    bad = df.filter(pl.col("seq") != pl.col("pos"))
    if bad.height:
        r = bad.row(0, named=True)
        raise SchemaError(f"rollout '{r['rollout_id']}': event at position {r['pos']} has seq "
                          f"{r['seq']} (events must be numbered 0..n-1 in order)",
                          file=path, field="seq")
    starts = df.filter("start").group_by("rollout_id").len().filter(pl.col("len") > 1)
    if starts.height:
        raise SchemaError(f"rollout '{starts['rollout_id'][0]}': events are not contiguous "
                          f"in the file", file=path, field="rollout_id")
    counts = df.group_by("rollout_id").len()
    return dict(zip(counts["rollout_id"].to_list(), counts["len"].to_list()))


def check_edges(edges: pa.Table, counts: dict[str, int], path: str) -> None:
    """Raise on the first edge that points backward, loops, or names a missing event."""
    df = pl.from_arrow(edges.select(["rollout_id", "src", "dst"]))
    if df.height == 0:
        return
    n = pl.DataFrame({"rollout_id": list(counts), "n": list(counts.values())},
                     schema={"rollout_id": pl.String, "n": pl.Int64})
    df = df.join(n, on="rollout_id", how="left")
    bad = df.filter(pl.col("n").is_null() | (pl.col("src") < 0) | (pl.col("dst") >= pl.col("n"))
                    | (pl.col("src") >= pl.col("dst")))
    if bad.height:
        r = bad.row(0, named=True)
        if r["n"] is None:
            msg = "has edges but no events"
        elif r["src"] >= r["dst"] and r["dst"] < r["n"] and r["src"] >= 0:
            msg = f"edge {r['src']} -> {r['dst']} points backward (edges must go forward in seq)"
        else:
            msg = f"edge {r['src']} -> {r['dst']} names an event outside 0..{r['n'] - 1}"
        raise SchemaError(f"rollout '{r['rollout_id']}': {msg}", file=path,
                          field="src" if r["n"] is not None and r["src"] >= r["dst"] else "dst")


def check_shard(events: pa.Table, edges: pa.Table, events_path: str, edges_path: str) -> None:
    check_edges(edges, check_events(events, events_path), edges_path)
