"""Arrow columns of generated CIM rows, written straight into Arrow buffers.

Ids are zero-padded decimals between fixed prefixes and suffixes, so every row of a column has
the same width and the string buffers are filled by numpy without Python objects (decimal
digits are valid hex, so trace and span ids keep the W3C shape). Low-cardinality columns are
taken from small vocabularies. ``rows_to_table`` assembles the CIM schema (schema.py) from the
row arrays the synth kernel produces, already in file order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.cim.catalog import CATALOG, ChunkSpec
from containmentbench.cim.schema import CIM_EVENTS

VERBS = [v for t in CATALOG for _, v in t.ops]
_PREFIX = ["file-", "chan-", "repo-", "tckt-", "crmr-", "mbox-"]  # one width: fixed_ids
_OPS = [op for t in CATALOG for op, _ in t.ops]
_SESSION = np.array([t.logs_session for t in CATALOG])
_LABELS = ("public", "internal", "confidential", "restricted")
VOCAB_VERBS = sorted({*VERBS, "delegate"})
_OP_VERB = np.array([VOCAB_VERBS.index(v) for v in VERBS])
_DELEGATE = VOCAB_VERBS.index("delegate")
_READISH = np.isin(np.array(VOCAB_VERBS), ("read", "search"))
_TOOLS = [t.name for t in CATALOG] + ["gateway"]
_CLASSES = [t.resource_class for t in CATALOG] + ["agent", "delegation"]
_KINDS = ["proposal", "", "delegate", "", "", "approval"]
_INTEGRITY = ["unbound:no_valid_delegation", "hint_conflict:delegation_id"]
_HINT = ['{"delegation_id":"dlg-forged"}']

Choice = tuple[list[str], np.ndarray]  # equal-length alternatives and a code per row


def _part(part: str | Choice, n: int) -> np.ndarray:
    if isinstance(part, str):
        return np.broadcast_to(np.frombuffer(part.encode(), dtype=np.uint8), (n, len(part)))
    alts, codes = part
    mat = np.array([np.frombuffer(a.encode(), dtype=np.uint8) for a in alts])
    return mat[codes]


def fixed_ids(prefix: str | Choice, values: np.ndarray, width: int,
              valid: np.ndarray | None = None, suffix: str | Choice = "") -> pa.Array:
    """prefix + zero-padded decimal + suffix per row, written straight into Arrow buffers."""
    n = len(values)
    pre, post = _part(prefix, n), _part(suffix, n)
    lp = pre.shape[1]
    k = lp + width + post.shape[1]
    buf = np.empty((n, k), dtype=np.uint8)
    buf[:, :lp] = pre
    buf[:, lp + width:] = post
    top = int(values.max(initial=0)) if n else 0
    digits = min(width, len(str(max(top, 0))))
    buf[:, lp: lp + width - digits] = 48  # constant leading zeros
    v = values.astype(np.uint32 if top < 2**32 else np.int64)
    for i in range(width - 1, width - 1 - digits, -1):
        buf[:, lp + i] = 48 + v % 10
        v = v // 10
    offsets = pa.py_buffer(np.arange(0, (n + 1) * k, k, dtype=np.int64))
    bitmap, nulls = None, 0
    if valid is not None:
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        nulls = int(n - valid.sum())
    return pa.LargeStringArray.from_buffers(n, offsets, pa.py_buffer(buf.reshape(-1)), bitmap,
                                            nulls).cast(pa.string())


def vocab(values: list[str | None], idx: np.ndarray, valid: np.ndarray | None = None
          ) -> pa.Array:
    mask = None if valid is None else ~np.asarray(valid, bool)
    return pa.array(values, pa.string()).take(pa.array(idx.astype(np.int32), mask=mask))


def rows_to_table(r: dict[str, np.ndarray], spec: ChunkSpec, wi: int, user: np.ndarray,
             agent: np.ndarray, parent: np.ndarray) -> pa.Table:
    """Arrow columns (CIM schema) from the row arrays, already in file order."""
    nrow = len(r["d"])
    pre = f"{spec.workflow}-{spec.day:03d}-{spec.bucket:05d}-"
    ctx = f"{wi + 1}{spec.day:03d}{spec.bucket:05d}"  # trace/span id prefix (hex digits)
    null = pa.scalar(None, pa.string())
    call = ~r["is_del"] & (r["kind"] == 0)
    gw = ~call  # minting and approval rows come from the gateway itself
    dl = fixed_ids(f"dlg-{pre}", r["d"], 7)
    par = parent[r["d"]]
    verb = np.where(call, _OP_VERB[r["op"]], _DELEGATE)
    scope = np.where(r["ext"], 2, np.where(_READISH[verb], 0, 1))
    res = fixed_ids((_PREFIX, r["univ"]), r["ridx"], 9, valid=call & ~r["search"])
    res = pc.if_else(pa.array(gw), dl, res)
    flagged = r["unbound"] | r["conflict"]
    integrity = pa.ListArray.from_arrays(
        pa.array(np.arange(nrow + 1, dtype=np.int32)),
        vocab(_INTEGRITY, np.where(r["conflict"], 1, 0)), mask=pa.array(~flagged))
    kind_gw = np.where(r["kind"] == 5, len(_CLASSES) - 1, len(_CLASSES) - 2)
    cols: dict[str, Any] = {
        "time": pa.array(r["t"]).cast(pa.timestamp("us", tz="UTC")),
        "event_id": fixed_ids(f"e-{pre}", r["eid"], 9),
        "delegation_id": pc.if_else(pa.array(r["bound"]), dl, null),
        "delegation_parent_id": fixed_ids(f"dlg-{pre}", np.maximum(par, 0), 7,
                                          valid=r["bound"] & (par >= 0)),
        "principal_user_id": fixed_ids("user-", user[r["d"]], 5, valid=~r["unbound"]),
        "agent_id": fixed_ids("agent-", agent[r["d"]], 6),
        "agent_instance_id": fixed_ids(f"inst-{pre}", r["inst"], 7),
        "tool_name": vocab(_TOOLS, np.where(call, r["tool"], len(_TOOLS) - 1)),
        "tool_operation": vocab(_OPS, r["op"], call),
        "action_semantic": vocab(VOCAB_VERBS, verb),
        "action_outcome": vocab(["success", "failure"], r["fail"].astype(np.int64)),
        "direction": vocab(["internal", "external"], r["ext"].astype(np.int64)),
        "principal_scope": vocab(["self", "org", "external"], scope),
        "resource_class": vocab(_CLASSES, np.where(call, r["tool"], kind_gw)),
        "resource_id": res,
        "resource_uri": pa.nulls(nrow, pa.string()),
        "sensitivity_label": vocab(list(_LABELS), r["label"], call & ~r["search"]),
        "target_principal_id": fixed_ids((["user-", "peer-"], r["ext"].astype(np.int64)),
                                         r["tgt"], 5, valid=r["target"],
                                         suffix=(["@corp.example", "@partners.net"],
                                                 r["ext"].astype(np.int64))),
        "trace_id": fixed_ids(ctx, r["trace"], 23, valid=r["traced"]),
        "span_id": fixed_ids(ctx, r["eid"], 7, valid=r["traced"]),
        "parent_span_id": fixed_ids(ctx, np.maximum(r["prev"], 0), 7, valid=r["prev"] >= 0),
        "workflow_id": pa.nulls(nrow, pa.string()),
        "labels": pa.nulls(nrow, pa.map_(pa.string(), pa.string())),
        "event_kind": vocab(_KINDS, r["kind"]),
        "delegation_binding": vocab(["bound", "unbound"], (~r["bound"]).astype(np.int64)),
        "call_id": pa.nulls(nrow, pa.string()),
        "session_id": fixed_ids(f"inst-{pre}", r["inst"], 7,
                                valid=call & _SESSION[r["tool"]]),
        "agent_hints": vocab(_HINT, np.zeros(nrow, np.int64), r["conflict"]),
        "integrity": integrity,
        "capture": vocab(["gateway", "uncovered", "bypass"], r["capture"]),
        "covered": pa.array(r["capture"] == 0),
        "gt_delegation_id": dl,
    }
    return pa.Table.from_pydict(cols, schema=CIM_EVENTS)
