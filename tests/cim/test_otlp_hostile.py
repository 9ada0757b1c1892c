"""Hostile OTLP/JSON to ``cim import`` (issue 37, item 6): wrong types, missing fields, huge
numbers, nested garbage, non-UTF-8, a FIFO, a link to /dev/zero and an oversized file each
end in one line naming the file and the field, exit 2, nothing written, never a traceback
(13 such inputs ended in tracebacks before the shapes were checked)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from containmentbench.cli.main import main

CLI = str(Path(sys.executable).parent / "containmentbench")


@pytest.fixture(scope="module")
def otlp(rollout_shard, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("otlp") / "exp"
    assert main(["cim", "export", "--traces", str(rollout_shard.parent), "--out", str(out),
                 "--format", "otel"]) == 0
    return json.loads((out / "otel" / "traces-00000.json").read_text())


def _span(doc: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return doc["resourceSpans"][0]["scopeSpans"][0]["spans"][i]


def _with_events(doc: dict[str, Any]) -> dict[str, Any]:
    return next(sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
                for sp in ss["spans"] if any(e.get("name") == "cim.row"
                                             for e in sp.get("events", [])))


def _attr(sp: dict[str, Any], key: str) -> dict[str, Any]:
    return next(a for a in sp["attributes"] if a["key"] == key)


def _set(path: str, value: Any):
    """A mutation setting the first span's field ``path`` (dots and [i])."""
    def go(doc: dict[str, Any]) -> None:
        obj: Any = _span(doc)
        parts = path.replace("[", ".").replace("]", "").split(".")
        for p in parts[:-1]:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        last = parts[-1]
        obj[int(last) if last.isdigit() else last] = value
    return go


def _event_attr(key: str, value: Any):
    def go(doc: dict[str, Any]) -> None:
        sp = _with_events(doc)
        ev = next(e for e in sp["events"] if e.get("name") == "cim.row")
        ev["attributes"].append({"key": key, "value": value})
    return go


def _deep(doc: dict[str, Any]) -> None:
    v: Any = "x"
    for _ in range(200):
        v = {"arrayValue": {"values": [v]}}
    _span(doc)["attributes"].append({"key": "delegation.integrity", "value": v})


CASES: dict[str, tuple[Any, str]] = {
    # a mutation of a valid export, and what the error line must name
    "resourceSpans_string": (lambda d: d.update({"resourceSpans": "spans"}), "resourceSpans"),
    "span_not_object": (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"].insert(0, 5),
                        "spans[0]"),
    "traceId_number": (_set("traceId", 123), "traceId"),
    "spanId_not_hex": (_set("spanId", "zz" * 8), "spanId"),
    "parentSpanId_number": (_set("parentSpanId", 7), "parentSpanId"),
    "start_time_json_number": (_set("startTimeUnixNano", 1.5e18), "startTimeUnixNano"),
    "start_time_huge": (_set("startTimeUnixNano", "9" * 40), "startTimeUnixNano"),
    "end_time_missing": (lambda d: _span(d).pop("endTimeUnixNano"), "endTimeUnixNano"),
    "attributes_object": (_set("attributes", {"a": 1}), "attributes"),
    "attribute_without_key": (lambda d: _span(d)["attributes"].insert(0, {"value": {}}),
                              "attributes[0]"),
    "string_value_number": (lambda d: _attr(_span(d), "cim.event.id").update(
        {"value": {"stringValue": 5}}), "cim.event.id"),
    "bool_value_text": (lambda d: _span(d)["attributes"].append(
        {"key": "cim.trace.synthetic", "value": {"boolValue": "yes"}}), "cim.trace.synthetic"),
    "array_of_ints": (lambda d: _span(d)["attributes"].append(
        {"key": "delegation.integrity", "value": {"arrayValue": {"values": [{"intValue": 3}]}}}),
        "delegation.integrity"),
    "string_where_list_is": (lambda d: _span(d)["attributes"].append(
        {"key": "delegation.integrity", "value": {"stringValue": "x"}}), "delegation.integrity"),
    "time_attribute_not_digits": (lambda d: _span(d)["attributes"].append(
        {"key": "cim.time_unix_nano", "value": {"stringValue": "soon"}}), "cim.time_unix_nano"),
    "events_of_numbers": (_set("events", [1, 2]), "events[0]"),
    "event_time_text": (lambda d: _with_events(d)["events"][0].update(
        {"timeUnixNano": "later"}), "timeUnixNano"),
    "labels_not_json": (_event_attr("cim.labels", {"stringValue": "[[1,2"}), "cim.labels"),
    "labels_wrong_shape": (_event_attr("cim.labels", {"stringValue": "[[1, 2, 3]]"}),
                           "cim.labels"),
    "null_unknown_column": (_event_attr("cim.null", {"arrayValue": {"values": [
        {"stringValue": "no_such_column"}]}}), "cim.null"),
    "null_required_column": (_event_attr("cim.null", {"arrayValue": {"values": [
        {"stringValue": "event_id"}]}}), "cim.null"),
    "nested_garbage": (_deep, "delegation.integrity"),
}


def _import(folder: Path, out: Path, capsys) -> list[str]:
    capsys.readouterr()
    rc = main(["cim", "import", "--otlp", str(folder), "--out", str(out)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert not out.exists()
    return err


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_otlp_json_is_one_line_naming_file_and_field(otlp, case, tmp_path, capsys):
    mutate, field = CASES[case]
    doc = copy.deepcopy(otlp)
    mutate(doc)
    folder = tmp_path / "otel"
    folder.mkdir()
    (folder / "traces-00000.json").write_text(json.dumps(doc))
    err = _import(folder, tmp_path / "store", capsys)[0]
    assert "traces-00000.json" in err and field in err, err


@pytest.mark.parametrize("raw,what", [
    (b"{not json", "not OTLP/JSON"),
    (b'{"resourceSpans": [{"x": "\xff\xfe"}]}', "UTF-8"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": 1e400}]}]}]}',
     "traceId"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b"NaN", "resourceSpans"),
    (b"[]", "resourceSpans"),
])
def test_hostile_otlp_bytes(raw, what, tmp_path, capsys):
    folder = tmp_path / "otel"
    folder.mkdir()
    (folder / "traces-00000.json").write_bytes(raw)
    err = _import(folder, tmp_path / "store", capsys)[0]
    assert "traces-00000.json" in err and what in err, err


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "oversized"])
def test_an_otlp_file_that_is_no_regular_file_or_too_large(kind, tmp_path):
    """A FIFO hung the import, a link to /dev/zero ate memory until the kernel killed it."""
    folder = tmp_path / "otel"
    folder.mkdir()
    f = folder / "traces-00000.json"
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "dev_zero":
        f.symlink_to("/dev/zero")
    else:
        with open(f, "wb") as fh:  # sparse: no disk used
            fh.truncate(300 << 20)
    res = subprocess.run([CLI, "cim", "import", "--otlp", str(folder), "--out",
                          str(tmp_path / "store")], capture_output=True, text=True, timeout=60)
    err = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(err) == 1 and "traces-00000.json" in err[0], err
    assert not (tmp_path / "store").exists()
