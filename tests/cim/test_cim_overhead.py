"""Table 6 bytes/event: the compact JSON encoding (defaults and absent values left out, RFC3339
``Z`` times) is exact — it decodes back to every CIM field."""

from __future__ import annotations

import pyarrow.parquet as pq

from containmentbench.cim.overhead import decode_json, encode_json, json_bytes
from containmentbench.cim.schema import BASELINE_FIELDS, CIM_EVENTS, CIM_FIELDS, conform
from containmentbench.cim.store import Store

from .conftest import hand_rows


def _table():
    rows = hand_rows()
    return conform({f.name: [r[f.name] for r in rows] for f in CIM_EVENTS})


def test_encoding_of_a_bound_proposal_and_an_unbound_row():
    rows = {r["event_id"]: r for r in _table().select(list(CIM_FIELDS)).to_pylist()}
    assert encode_json(rows["a1"]) == (
        b'{"time":"2026-01-01T00:00:01Z","event_id":"a1","principal_user_id":"u1",'
        b'"agent_id":"planner","agent_instance_id":"iA","tool_name":"docs",'
        b'"tool_operation":"get","resource_id":"doc-1","action_outcome":"success",'
        b'"trace_id":"TA","span_id":"s-a1","parent_span_id":"s-a0","session_id":"iA",'
        b'"delegation_id":"dA","action_semantic":"read","direction":"internal",'
        b'"principal_scope":"self","resource_class":"document",'
        b'"sensitivity_label":"internal"}\n')
    c4 = encode_json(rows["c4"])  # the absence state stays explicit
    assert b'"delegation_binding":"unbound"' in c4 and b'"integrity":["misbinding:' in c4
    assert b'"event_kind":"commit"' in encode_json(rows["c3"])


def test_round_trip_is_exact_on_a_real_export(rollout_store):
    st = Store(rollout_store)
    t = pq.read_table(st.root / st.files[0], columns=list(CIM_FIELDS))
    for names in (BASELINE_FIELDS, CIM_FIELDS):
        for row in t.select(list(names)).to_pylist():
            assert decode_json(encode_json(row), names) == row
    assert json_bytes(t, CIM_FIELDS) == sum(len(encode_json(r)) for r in t.to_pylist())
