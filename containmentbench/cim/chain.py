"""Optional tamper-evident hash chain over emitted CIM events (paper 002 App. C.1, I5).

App. C.1 ("Defense in depth") lets the gateway "apply tamper-evident protections (e.g.,
event signing) to emitted telemetry"; this is the classic forward-chained audit log of
Schneier and Kelsey (1999), cited in Table 3. For the i-th row of an events file, in file
(emission) order::

    h_0 = sha256("containmentbench-cim-chain-v1")
    h_i = sha256(h_{i-1} || canonical(e_i))

where ``canonical`` is canonical JSON of every CIM column (sorted keys, compact, ``time``
as RFC3339 with microseconds). Editing row i breaks h_i; deleting or inserting a row breaks
the first row after the gap; truncation is caught by the file's recorded head hash in the
manifest. ``verify`` names the first broken event. Each events file is its own chain.

Unkeyed, the chain only catches accidental corruption: an editor can recompute every hash.
With a key (integrity.keys: env or key file outside the store) every link is an HMAC,
``h_i = HMAC_k(h_{i-1} || canonical(e_i))`` from ``h_0 = HMAC_k("genesis")``, and the
manifest authenticates the list of events files, their heads and its metadata, so an edited
row (chain recomputed or not), a deleted or added events file and an edited manifest field
are each named.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from containmentbench.canonical import canonical_json
from containmentbench.cim.schema import CIM_EVENTS
from containmentbench.integrity.keys import mac_bytes

GENESIS = hashlib.sha256(b"containmentbench-cim-chain-v1").hexdigest()


def genesis(key: bytes | None = None) -> str:
    return GENESIS if key is None else mac_bytes(key, b"containmentbench-cim-chain-v1")


def _link(prev: str, row: bytes, key: bytes | None) -> str:
    if key is None:
        return hashlib.sha256(prev.encode("ascii") + row).hexdigest()
    return mac_bytes(key, prev.encode("ascii") + row)


def _plain(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return v


def canonical_event(row: dict[str, Any]) -> bytes:
    """The bytes hashed for one row: every CIM column, labels as an object."""
    out = {}
    for name in CIM_EVENTS.names:
        v = row.get(name)
        if name == "labels" and v is not None:
            v = {k: val for k, val in v}
        out[name] = _plain(v)
    return canonical_json(out).encode("utf-8")


def chain_hashes(table: pa.Table, prev: str | None = None, key: bytes | None = None
                 ) -> list[str]:
    prev = genesis(key) if prev is None else prev
    out = []
    for row in table.select(CIM_EVENTS.names).to_pylist():
        prev = _link(prev, canonical_event(row), key)
        out.append(prev)
    return out


def add_chain(table: pa.Table, key: bytes | None = None) -> pa.Table:
    """The table with a ``chain_hash`` column appended (rows in emission order)."""
    hashes = chain_hashes(table, key=key)
    if "chain_hash" in table.column_names:
        table = table.drop_columns(["chain_hash"])
    return table.append_column("chain_hash", pa.array(hashes, pa.string()))


@dataclass(frozen=True, slots=True)
class ChainBreak:
    file: str
    row: int
    event_id: str
    reason: str


def verify_file(path: Path, rel: str, head: str | None = None, key: bytes | None = None
                ) -> ChainBreak | None:
    """First broken row of one chained events file (None when intact)."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        return ChainBreak(rel, -1, "", f"unreadable Parquet ({' '.join(str(exc).split())})")
    if "chain_hash" not in table.column_names:
        return ChainBreak(rel, -1, "", "file has no chain_hash column (exported without --chain)")
    stored = table.column("chain_hash").to_pylist()
    prev = genesis(key)
    for i, row in enumerate(table.select(CIM_EVENTS.names).to_pylist()):
        prev = _link(prev, canonical_event(row), key)
        if stored[i] != prev:
            return ChainBreak(rel, i, row["event_id"],
                              "row content or order does not match its chain hash")
        prev = stored[i]
    if head is not None and (stored[-1] if stored else genesis(key)) != head:
        last = table.column("event_id")[-1].as_py() if table.num_rows else ""
        return ChainBreak(rel, table.num_rows - 1, last,
                          "chain head differs from the manifest (rows removed at the end)")
    return None


def verify_chain(root: Path, files: list[str], heads: dict[str, str] | None = None,
                 key: bytes | None = None) -> list[ChainBreak]:
    """The first broken row of every events file (empty: intact)."""
    out = []
    for rel in files:
        brk = verify_file(root / rel, rel, (heads or {}).get(rel), key)
        if brk is not None:
            out.append(brk)
    return out
