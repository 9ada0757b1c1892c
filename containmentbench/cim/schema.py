"""The CIM event envelope (paper 002 Appendix B.1, Table 8) as an Arrow schema.

Table 8 names fields with dots (``principal.user_id``); Parquet columns are flat, so each
nested name is flattened by ``FIELD_MAP`` (the one documented mapping, also in docs/cim.md).
The rule: drop the dots, and drop a prefix that only repeats the leaf (``agent.agent_id`` ->
``agent_id``, ``action.tier2.direction`` -> ``direction``); ``resource.type`` is stored as
``resource_class`` because §4 queries use that name for the same concept (Table 8 note).

Required fields (Table 8 "Req") are ``nullable=False`` except ``delegation_id`` and
``principal_user_id``: the gateway contract (§6 (d)) emits a call without valid delegation
context with the explicit state ``delegation_binding = "unbound"`` instead of dropping it, so
those two may be null exactly when the row is not bound (``validate`` checks this).

Extension fields (§4.4 "extension points") carry what the gateway knows beyond Table 8:
the record kind, the binding state, the call id that links a proposal to its commit, the
runtime session id (a correlation hint used by baseline B0), agent-provided hints and
integrity signals (App. C.3). Evaluation-only fields (``capture``, ``covered``,
``gt_delegation_id``) hold ground truth (§7.2.3) and are never read by a CIM query.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from containmentbench.errors import SchemaError

CIM_VERSION = "1"

# Tier-1 verbs (§4.2: read/write/share/invoke required; App. B.2 taxonomy extends them).
TIER1_REQUIRED = ("read", "write", "share", "invoke")
TIER1_GROUPS: dict[str, tuple[str, ...]] = {
    "read_discovery": ("read", "search", "enumerate"),
    "write_modification": ("write", "delete", "move"),
    "sharing_authorization": ("share", "revoke", "invite"),
    "execution_delegation": ("invoke", "delegate", "spawn"),
}
TIER1_VERBS = tuple(v for group in TIER1_GROUPS.values() for v in group)
VERB_GROUP = {v: g for g, vs in TIER1_GROUPS.items() for v in vs}

# Tier-2 qualifiers (§4.2 (i)-(iv), Table 8 enums). Sensitivity is ordered (drift, §5.4).
DIRECTIONS = ("internal", "external", "unknown")
PRINCIPAL_SCOPES = ("self", "team", "org", "external", "unknown")
SENSITIVITY_ORDER = ("public", "internal", "confidential", "restricted")
SENSITIVITY_LABELS = (*SENSITIVITY_ORDER, "unknown")
OUTCOMES = ("success", "failure", "unknown")

# Record kinds: the gateway-emitted trace kinds plus ``approval`` (an authority expansion
# event, §5.4) projected from approved confirmations or emitted by the generator.
EVENT_KINDS = ("proposal", "commit", "delegate", "spawn", "message", "approval")
ACTION_KINDS = ("proposal",)  # one row per tool call that reached the gateway
BINDINGS = ("bound", "unbound")
CAPTURES = ("gateway", "uncovered", "bypass")

_s = pa.string()

# Table 8 nested name -> flat column.
FIELD_MAP: dict[str, str] = {
    "time": "time",
    "event_id": "event_id",
    "delegation_id": "delegation_id",
    "delegation_parent_id": "delegation_parent_id",
    "principal.user_id": "principal_user_id",
    "agent.agent_id": "agent_id",
    "agent.instance_id": "agent_instance_id",
    "tool.name": "tool_name",
    "tool.operation": "tool_operation",
    "action.semantic": "action_semantic",
    "action.outcome": "action_outcome",
    "action.tier2.direction": "direction",
    "action.tier2.principal_scope": "principal_scope",
    "resource.type": "resource_class",
    "resource.id": "resource_id",
    "resource.uri": "resource_uri",
    "resource.sensitivity_label": "sensitivity_label",
    "target.principal_id": "target_principal_id",
    "trace.trace_id": "trace_id",
    "trace.span_id": "span_id",
    "trace.parent_span_id": "parent_span_id",
    "workflow.workflow_id": "workflow_id",
    "labels": "labels",
}
REQUIRED = ("time", "event_id", "delegation_id", "principal.user_id", "agent.agent_id",
            "tool.name", "action.semantic")  # App. B.1 "Required fields"

TABLE8 = [
    pa.field("time", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("event_id", _s, nullable=False),
    pa.field("delegation_id", _s),            # null only when delegation_binding != bound
    pa.field("delegation_parent_id", _s),
    pa.field("principal_user_id", _s),        # null only when delegation_binding != bound
    pa.field("agent_id", _s, nullable=False),
    pa.field("agent_instance_id", _s),
    pa.field("tool_name", _s, nullable=False),
    pa.field("tool_operation", _s),
    pa.field("action_semantic", _s, nullable=False),
    pa.field("action_outcome", _s),
    pa.field("direction", _s),
    pa.field("principal_scope", _s),
    pa.field("resource_class", _s),
    pa.field("resource_id", _s),
    pa.field("resource_uri", _s),
    pa.field("sensitivity_label", _s),
    pa.field("target_principal_id", _s),
    pa.field("trace_id", _s),
    pa.field("span_id", _s),
    pa.field("parent_span_id", _s),
    pa.field("workflow_id", _s),
    pa.field("labels", pa.map_(_s, _s)),
]
EXTENSIONS = [
    pa.field("event_kind", _s, nullable=False),
    pa.field("delegation_binding", _s, nullable=False),
    pa.field("call_id", _s),
    pa.field("session_id", _s),
    pa.field("agent_hints", _s),              # agent-provided, untrusted (App. C.3)
    pa.field("integrity", pa.list_(_s)),      # gateway integrity signals (App. C.3)
]
EVALUATION = [
    pa.field("capture", _s, nullable=False),  # gateway | uncovered | bypass (§7.1)
    pa.field("covered", pa.bool_(), nullable=False),
    pa.field("gt_delegation_id", _s),         # R*_auth (§7.2.3), evaluation only
]
CIM_EVENTS = pa.schema(TABLE8 + EXTENSIONS + EVALUATION)
CHAIN_FIELD = pa.field("chain_hash", _s)      # optional hash chain (App. C.1, chain.py)

# Table 6's two field sets: the baseline keeps event-local attributes and correlation hints
# (what audit logs and traces carry); CIM adds delegation context, lineage and normalized
# predicates (§7.4 "Measurement setup").
BASELINE_FIELDS = ("time", "event_id", "principal_user_id", "agent_id", "agent_instance_id",
                   "tool_name", "tool_operation", "resource_id", "target_principal_id",
                   "action_outcome", "trace_id", "span_id", "parent_span_id", "session_id")
CIM_FIELDS = (*BASELINE_FIELDS, "delegation_id", "delegation_parent_id", "delegation_binding",
              "action_semantic", "direction", "principal_scope", "resource_class",
              "sensitivity_label", "workflow_id", "event_kind", "call_id", "agent_hints",
              "integrity")

# The delegation side table (store.py): one row per minted delegation, the lineage edges of
# §5.3 (``delegation_parent_id``) and where its rows live, so delegation-scoped queries prune.
DELEGATIONS = pa.schema([
    pa.field("delegation_id", _s, nullable=False),
    pa.field("delegation_parent_id", _s),
    pa.field("root_delegation_id", _s, nullable=False),
    pa.field("depth", pa.int16(), nullable=False),
    pa.field("principal_user_id", _s),
    pa.field("agent_id", _s),
    pa.field("agent_instance_id", _s),
    pa.field("minted_time", pa.timestamp("us", tz="UTC")),
    pa.field("workflow", _s, nullable=False),
    pa.field("file", _s, nullable=False),     # events file holding the delegation's rows
    pa.field("n_events", pa.int32(), nullable=False),
    pa.field("gt_drift", pa.bool_()),         # generator ground truth (evaluation only)
    pa.field("gt_approved", pa.bool_()),
])

_ENUMS: dict[str, tuple[str, ...]] = {
    "action_semantic": TIER1_VERBS, "direction": DIRECTIONS, "principal_scope":
    PRINCIPAL_SCOPES, "sensitivity_label": SENSITIVITY_LABELS, "action_outcome": OUTCOMES,
    "event_kind": EVENT_KINDS, "delegation_binding": BINDINGS, "capture": CAPTURES}

# Parquet layout (store.py): dictionaries for low-cardinality columns, delta encodings for
# sorted ids and times, statistics for row-group pruning.
DELTA_STRINGS = ("event_id", "span_id", "parent_span_id")
PLAIN_STRINGS = ("resource_id", "target_principal_id", "trace_id")  # mostly distinct values


def parquet_options(names: list[str] | tuple[str, ...]) -> dict[str, object]:
    """Writer options for a CIM table with these columns (compact and prunable)."""
    enc = {n: "DELTA_BYTE_ARRAY" for n in DELTA_STRINGS if n in names}
    if "time" in names:
        enc["time"] = "DELTA_BINARY_PACKED"
    return {"compression": "zstd", "compression_level": 3, "write_statistics": True,
            "use_dictionary": [n for n in names
                               if n not in enc and n not in PLAIN_STRINGS and n != "labels"],
            "column_encoding": enc, "data_page_version": "2.0"}


def empty_columns() -> dict[str, list[object]]:
    return {f.name: [] for f in CIM_EVENTS}


def validate(table: pa.Table, where: str = "<table>") -> None:
    """Check columns, types, required fields, enums and the bound => id rule."""
    for f in CIM_EVENTS:
        i = table.schema.get_field_index(f.name)
        if i < 0:
            raise SchemaError(f"missing CIM column '{f.name}'", file=where, field=f.name)
        if not table.schema.field(i).type.equals(f.type):
            raise SchemaError(f"column '{f.name}' has type {table.schema.field(i).type}, "
                              f"expected {f.type}", file=where, field=f.name)
        if not f.nullable and table.column(f.name).null_count:
            raise SchemaError(f"required column '{f.name}' has nulls", file=where,
                              field=f.name)
    for name, allowed in _ENUMS.items():
        values = pc.unique(table.column(name)).to_pylist()
        bad = [v for v in values if v is not None and v not in allowed]
        if bad:
            raise SchemaError(f"value '{bad[0]}' not in the {name} enum", file=where,
                              field=name)
    bound = pc.equal(table.column("delegation_binding"), "bound")
    for name in ("delegation_id", "principal_user_id"):
        missing = pc.and_(bound, pc.is_null(table.column(name)))
        if pc.any(missing).as_py():
            raise SchemaError(f"bound row without {name}", file=where, field=name)


def conform(columns: Mapping[str, object] | pa.Table) -> pa.Table:
    """A table in CIM column order and types (extra columns dropped)."""
    if isinstance(columns, pa.Table):
        return columns.select(CIM_EVENTS.names).cast(CIM_EVENTS)
    arrays = []
    for f in CIM_EVENTS:
        v = columns[f.name]
        if isinstance(v, pa.Array | pa.ChunkedArray):
            arrays.append(v.cast(f.type))
        elif f.name == "time" and v and isinstance(v[0], int):  # microseconds since epoch
            arrays.append(pa.array(v, pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(v, type=f.type))
    return pa.Table.from_arrays(arrays, schema=CIM_EVENTS)
