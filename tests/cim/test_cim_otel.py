"""OTLP export of CIM rows: GenAI span shape, exact round trip without evaluation fields,
bounded batches, strict protobuf parsing, and a real OTLP/HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.request
from pathlib import Path

import polars as pl
import pytest

from containmentbench.cim.otel import EVAL, from_otlp, to_otlp, to_protobuf
from containmentbench.cim.project import project_events
from containmentbench.cli.main import main
from containmentbench.trace.io import read_shards


@pytest.fixture(scope="module")
def cim_rows(rollout_shard):
    root = rollout_shard.parent
    return project_events(read_shards(root, "events"), read_shards(root, "rollouts"))[0]


def _spans(docs):
    return [sp for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"]
            for sp in ss["spans"]]


def _attrs(sp):
    return {a["key"]: next(iter(a["value"].values())) for a in sp["attributes"]}


def test_spans_follow_genai_conventions(cim_rows):
    traces, logs = to_otlp(cim_rows)
    spans = _spans(traces)
    rows = pl.from_arrow(cim_rows)
    tools = [s for s in spans if _attrs(s)["gen_ai.operation.name"] == "execute_tool"]
    # one span per tool call: request, decision and commit are events of it, not spans
    assert len(tools) == rows.filter(pl.col("event_kind") == "proposal").height
    assert all(s["kind"] == 1 for s in spans)  # INTERNAL
    by_id = {s["spanId"]: s for s in spans}
    for s in tools:
        a = _attrs(s)
        assert a["gen_ai.provider.name"] == "containmentbench.sim"
        assert {"gen_ai.tool.name", "gen_ai.tool.call.id", "delegation.id"} <= set(a)
        assert _attrs(by_id[s["parentSpanId"]])["gen_ai.operation.name"] == "invoke_agent"
        names = [e["name"] for e in s.get("events", [])]
        assert "cim.decision" in names
    committed = [s for s in tools if any(_attrs(e).get("cim.event.kind") == "commit"
                                         for e in s.get("events", []))]
    assert committed and all(int(s["endTimeUnixNano"]) > int(s["startTimeUnixNano"])
                             for s in committed)
    subs = [s for s in spans if _attrs(s)["gen_ai.operation.name"] == "invoke_agent"
            and "delegation.parent_id" in _attrs(s)]
    assert subs and all(s["links"][0]["spanId"] in by_id for s in subs)
    # evaluation-only ground truth never leaves the Parquet store
    text = json.dumps(traces)
    assert "gt_delegation" not in text and "cim.capture" not in text and "covered" not in text
    assert sum(len(rl["scopeLogs"][0]["logRecords"]) for d in logs
               for rl in d["resourceLogs"]) == len(tools)


def test_round_trip_and_bounded_batches(cim_rows):
    traces, _ = to_otlp(cim_rows, max_bytes=200_000)
    assert len(traces) > 1
    assert max(len(json.dumps(d, separators=(",", ":"))) for d in traces) <= 200_000
    keep = [c for c in cim_rows.column_names if c not in EVAL]
    back = pl.from_arrow(from_otlp(traces)).select(keep).sort("event_id")
    assert back.equals(pl.from_arrow(cim_rows).select(keep).sort("event_id"))


def test_protobuf_is_strict_otlp(cim_rows):
    pytest.importorskip("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    traces, logs = to_otlp(cim_rows)
    n = 0
    for d in traces:
        msg = ExportTraceServiceRequest.FromString(to_protobuf(d))
        n += sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
    assert n == len(_spans(traces))
    for d in logs:
        to_protobuf(d, "logs")
    bad = json.loads(json.dumps(traces[0]))
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["bogus"] = 1
    with pytest.raises(Exception, match="bogus"):
        to_protobuf(bad)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_otlp_receiver_takes_the_export(cim_rows):
    oteltap = pytest.importorskip("oteltap")
    traces, logs = to_otlp(cim_rows)
    sent = {sp["spanId"] for sp in _spans(traces)}
    n_logs = sum(len(rl["scopeLogs"][0]["logRecords"]) for d in logs
                 for rl in d["resourceLogs"])
    port = _free_port()

    async def run() -> tuple[set[str], int]:
        settings = oteltap.OtelTapHttpProtobufReceiverSettings(http_port=port)
        async with oteltap.OtelTapHttpProtobufReceiver(settings) as rx:
            got: set[str] = set()
            n = 0

            async def collect_spans() -> None:
                async for sp in rx.stream_traces():
                    got.add(sp.span_id.hex())
                    if got >= sent:
                        return

            async def collect_logs() -> None:
                nonlocal n
                async for _ in rx.stream_logs():
                    n += 1
                    if n >= n_logs:
                        return

            tasks = [asyncio.create_task(collect_spans()), asyncio.create_task(collect_logs())]
            await asyncio.sleep(0.2)
            for signal, docs in (("traces", traces), ("logs", logs)):
                for d in docs:
                    req = urllib.request.Request(
                        f"http://127.0.0.1:{port}/v1/{signal}", data=to_protobuf(d, signal),
                        headers={"Content-Type": "application/x-protobuf"})
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        assert resp.status == 200
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)
            return got, n

    got, n = asyncio.run(run())
    assert got == sent and n == n_logs


def test_import_names_the_malformed_field(rollout_shard, tmp_path: Path, capsys):
    out = tmp_path / "exp"
    assert main(["cim", "export", "--traces", str(rollout_shard.parent), "--out", str(out),
                 "--format", "otel"]) == 0
    assert main(["cim", "import", "--otlp", str(out / "otel"), "--out",
                 str(tmp_path / "back")]) == 0
    f = out / "otel" / "traces-00000.json"
    doc = json.loads(f.read_text())
    del doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["traceId"]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "traces-00000.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["cim", "import", "--otlp", str(bad), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "spans[1]" in err[0] and "traceId" in err[0]
    assert not (tmp_path / "x").exists()
