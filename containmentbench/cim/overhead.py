"""Operational overhead of CIM (paper 002 §7.4, Table 6).

* Gateway latency: the time the gateway adds to each tool call of a real run — delegation
  binding, validation and normalization (``Gateway.bind``) plus the live emitter's projection
  and batching of the call's rows (live.py) — measured per call on the micro-deployment
  (cim/micro.py drives W1-W3 through the real runtime) and stored in that store's
  manifest; ``latency_summary`` turns the per-call samples into Table 6's p50/p95.
* Bytes/event: each event projected to the baseline field set vs the CIM field set
  (schema.BASELINE_FIELDS / CIM_FIELDS), as compressed Parquet with the store's writer
  options and, for comparison with the paper's 341/588 bytes, as compact JSON.

The compact JSON encoding (``encode_json``; ``decode_json`` inverts it exactly, tested):
no whitespace, absent values left out (not ``null``), ``time`` as RFC3339 UTC with ``Z``
(Table 8: RFC3339), and two extension fields (§4.4) left out at their default, as proto3's
JSON mapping leaves out defaults: ``delegation_binding`` is written only when ``unbound`` (a
row carrying a gateway-validated delegation is bound; §6 (d) asks for the *absence* state to
be explicit, and it stays so), ``event_kind`` only when the row is not the base record of a
tool call (``proposal``). Evaluation-only fields are never part of either field set.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from containmentbench.cim.schema import BASELINE_FIELDS, CIM_FIELDS, parquet_options
from containmentbench.integrity import writer


def latency_summary(gateway_ns: Sequence[int], tool_ns: Sequence[int] | None = None
                    ) -> dict[str, Any]:
    """Table 6 latency rows from per-call samples (nanoseconds): p50/p95 in microseconds of
    the gateway's added time and, when given, of the tool call alone."""
    g = np.asarray(gateway_ns, dtype=np.float64) * 1e-3
    out: dict[str, Any] = {"n_calls": int(g.size)}
    if g.size:
        out.update(gateway_p50_us=float(np.percentile(g, 50)),
                   gateway_p95_us=float(np.percentile(g, 95)),
                   gateway_max_us=float(g.max()))
    if tool_ns is not None and len(tool_ns):
        t = np.asarray(tool_ns, dtype=np.float64) * 1e-3
        out.update(tool_p50_us=float(np.percentile(t, 50)),
                   tool_p95_us=float(np.percentile(t, 95)))
    return out


def parquet_bytes(table: pa.Table, names: tuple[str, ...]) -> int:
    sub = table.select(list(names))
    return len(writer.parquet_bytes(sub, **parquet_options(list(names))))


JSON_DEFAULTS = {"delegation_binding": "bound", "event_kind": "proposal"}


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def encode_json(row: dict[str, Any]) -> bytes:
    """One CIM row as a compact JSON line (module docstring)."""
    out = {}
    for k, v in row.items():
        if v is None or JSON_DEFAULTS.get(k) == v:
            continue
        out[k] = _rfc3339(v) if isinstance(v, datetime) else v
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def decode_json(line: bytes, names: Sequence[str]) -> dict[str, Any]:
    """The row ``encode_json`` wrote, with absent fields and defaults restored."""
    d = json.loads(line)
    row = {k: d.get(k, JSON_DEFAULTS.get(k)) for k in names}
    if isinstance(row.get("time"), str):
        row["time"] = datetime.fromisoformat(row["time"].replace("Z", "+00:00"))
    return row


def json_bytes(table: pa.Table, names: tuple[str, ...]) -> int:
    return sum(len(encode_json(r)) for r in table.select(list(names)).to_pylist())


def bytes_per_event(table: pa.Table, json_sample: int = 20_000) -> dict[str, float]:
    """Table 6 bytes/event: baseline vs CIM field sets, Parquet (all rows) and JSON (sample)."""
    n = max(table.num_rows, 1)
    sample = table.slice(0, min(json_sample, table.num_rows))
    m = max(sample.num_rows, 1)
    out = {"n_events": table.num_rows,
           "parquet_baseline": parquet_bytes(table, BASELINE_FIELDS) / n,
           "parquet_cim": parquet_bytes(table, CIM_FIELDS) / n,
           "json_baseline": json_bytes(sample, BASELINE_FIELDS) / m,
           "json_cim": json_bytes(sample, CIM_FIELDS) / m}
    out["parquet_delta"] = out["parquet_cim"] - out["parquet_baseline"]
    out["json_delta"] = out["json_cim"] - out["json_baseline"]
    return out
