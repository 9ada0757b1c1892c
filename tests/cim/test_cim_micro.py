"""The micro-deployment (§7.1) and coverage against a declared tool inventory (App. C.5)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from containmentbench.cim.coverage import Inventory, coverage, load_inventory
from containmentbench.cim.micro import Meter, MicroParams, kept_samples, run_scenarios
from containmentbench.cim.schema import CIM_EVENTS, conform, validate
from containmentbench.cim.store import Store, write_store
from containmentbench.cli.main import main

from .conftest import hand_rows

INVENTORY = """routing: best-effort
bypass: 0.0
tools:
  - {name: docs, mediated: true}
  - {name: crm, mediated: true}
  - {name: email, mediated: true}
  - {name: drive, mediated: false}
  - {name: jira, mediated: true}
"""


def _inv(tmp_path: Path, text: str = INVENTORY, name: str = "inv.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _captured_store(tmp_path: Path) -> Path:
    rows = hand_rows()
    for r in rows:  # e1 ran on an unmediated channel, d4 went around the gateway
        if r["event_id"] in ("e1", "d4"):
            r.update(capture="uncovered" if r["event_id"] == "e1" else "bypass",
                     covered=False, delegation_id=None, delegation_binding="unbound",
                     principal_user_id=None, delegation_parent_id=None)
    cols = {f.name: [r[f.name] for r in rows] for f in CIM_EVENTS}
    return write_store(tmp_path / "cap", conform(cols), workflow="hand")


def test_coverage_counts_each_call_class_per_declared_tool(tmp_path):
    table, info = coverage(Store(_captured_store(tmp_path)), load_inventory(_inv(tmp_path)))
    got = {r["tool"]: (r["covered"], r["unbound"], r["uncovered"], r["status"])
           for r in table.iter_rows(named=True)}
    # 14 proposals: docs a1 d1 d2 (+ d4 bypass), crm a2, agents a3 b2, drive b1,
    # email c1 c2 (+ c4 unbound), slack e2 e3 (+ e1 uncovered); jira never called
    assert got == {"docs": (3, 0, 1, "covered"), "crm": (1, 0, 0, "covered"),
                   "agents": (2, 0, 0, "gateway-internal"), "drive": (1, 0, 0, "unmediated"),
                   "email": (2, 1, 0, "covered"), "slack": (2, 0, 1, "undeclared"),
                   "jira": (0, 0, 0, "silent")}
    assert (info["n_calls"], info["n_covered"], info["n_unbound"], info["n_uncovered"]) == (
        14, 11, 1, 2)
    assert info["coverage"] == 11 / 14
    assert info["silent_tools"] == ["jira"] and info["undeclared_tools"] == ["slack"]


def test_inventory_naming_an_unknown_tool_is_one_line_exit_2_nothing_written(
        tmp_path, hand_store, capsys):
    bad = _inv(tmp_path, INVENTORY.replace("name: jira", "name: fax"))
    out = tmp_path / "cov.json"
    rc = main(["cim", "coverage", "--store", str(hand_store), "--inventory", str(bad),
               "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "tools[4].name" in err and "unknown tool 'fax'" in err
    assert not out.exists()
    store = tmp_path / "micro"
    assert main(["cim", "micro", "--out", str(store), "--inventory", str(bad)]) == 2
    assert not store.exists()


def test_inventory_rejects_bad_shapes(tmp_path):
    import pytest

    from containmentbench.errors import BenchError

    cases = {"routing: sideways\ntools: [{name: docs}]": "routing",
             "bypass: 2\ntools: [{name: docs}]": "bypass",
             "tools: []": "tools",
             "tools: [{name: docs}, {name: docs}]": "tools[1].name",
             "tools: [{name: docs, mediated: maybe}]": "tools[0].mediated",
             "routing: mandatory\nbypass: 0.1\ntools: [{name: docs}]": "bypass"}
    for i, (text, field) in enumerate(cases.items()):
        with pytest.raises(BenchError) as exc:
            load_inventory(_inv(tmp_path, text, f"i{i}.yaml"))
        assert f"field '{field}'" in str(exc.value)


def test_meter_charges_binding_and_emission_to_the_open_call():
    m = Meter()
    m.add("r", 4)                      # before any call: not a tool invocation
    m.call("r", "read_email", 5)
    m.tag("r", "c1")
    m.add("r", 3)
    m.call("r", "send_email", 7)       # closes c1
    m.tag("r", "c2")
    m.call("s", "read_document", 2)
    m.close()
    assert m.samples == [("r", "read_email", "c1", 8), ("r", "send_email", "c2", 7),
                         ("s", "read_document", None, 2)]
    assert m.other_ns == 4
    inv = Inventory("best-effort", 0.0, {"email": False, "docs": True})
    assert kept_samples(m.samples, inv, 1) == [2]  # email calls never reach the gateway


def test_w3_plans_fail_before_they_succeed():
    from containmentbench.scenarios.manifest import load_suite

    pool = [s for s in load_suite("full_main", "clean") if s.topology == "single"]
    p = MicroParams(workflows=("W3",), users_per_run=3, overlap_rate=0.0, retry_mean=2.0)
    for s in run_scenarios(pool, "W3", 0, p):
        assert s.initial_state["principal"]["user_id"].startswith("user-micro-w3-000-")
        steps = [(x.tool, next(iter(x.args.values()), None)) for x in s.benign_plan]
        failing = [i for i, (_, v) in enumerate(steps) if isinstance(v, str) and "-x" in v]
        assert failing, "retry_mean 2 gives failing attempts"
        for i in failing:  # each failed attempt is followed by the same tool on the real id
            j = next(k for k in range(i + 1, len(steps)) if "-x" not in str(steps[k][1]))
            assert steps[j][0] == steps[i][0] and steps[i][1].startswith(str(steps[j][1]))


def test_micro_run_through_the_runtime_writes_a_store_with_coverage_and_latency(tmp_path):
    out = tmp_path / "micro"
    inv = _inv(tmp_path, "bypass: 0.2\ntools:\n  - {name: calendar, mediated: false}\n"
                         "  - {name: email}\n  - {name: docs}\n  - {name: crm}\n")
    assert main(["cim", "micro", "--out", str(out), "--inventory", str(inv), "--runs", "1",
                 "--users-per-run", "2", "--reads-min", "3", "--reads-max", "5",
                 "--quiet"]) == 0
    st = Store(out)
    df = st.scan().collect()
    validate(df.to_arrow().cast(CIM_EVENTS), "micro")
    man = json.loads((out / "manifest.json").read_text())
    cov, lat = man["coverage"], man["latency"]
    # one latency sample per call the gateway saw: mediated, not bypassed
    assert lat["n_calls"] == cov["n_covered"] + cov["n_unbound"] > 0
    assert lat["n_calls_all"] == cov["n_calls"]
    assert 0 < lat["gateway_p50_us"] <= lat["gateway_p95_us"]
    cal = df.filter(pl.col("tool_name") == "calendar")
    assert cal.height == 0 or (cal["capture"] == "uncovered").all()
    assert df.filter(~pl.col("covered"))["delegation_id"].null_count() == \
        df.filter(~pl.col("covered")).height
    assert set(df.filter(pl.col("capture") == "bypass")["tool_name"]) <= {"email", "docs",
                                                                           "crm", "tasks",
                                                                           "memory", "agents",
                                                                           "messaging"}
    side = st.delegations().collect()
    assert sorted(side["workflow"].unique()) == ["W1", "W2", "W3"]
    assert side.filter(pl.col("workflow") == "W2")["delegation_parent_id"].null_count() < \
        side.filter(pl.col("workflow") == "W2").height  # re-delegation edges
    # live rows use the wall clock of capture
    assert df["time"].min().year >= 2025
    # Table 6 rows appear in the report from the manifest
    rc = main(["cim", "report", "--store", str(out), "--latency", "--suite-repeats", "1",
               "--max-buckets", "1"])
    assert rc == 0


def test_micro_takes_any_backend_the_rollout_verb_takes(tmp_path):
    """The verb is backend-agnostic: `scripted` replays the plans without a model, as a real
    CPU model (hf/vllm/openai) would act through the same runtime."""
    out = tmp_path / "scripted"
    inv = _inv(tmp_path, "tools:\n  - {name: email}\n  - {name: docs}\n")
    assert main(["cim", "micro", "--out", str(out), "--inventory", str(inv), "--runs", "1",
                 "--users-per-run", "1", "--overlap-rate", "0", "--workflows", "W1",
                 "--reads-min", "2", "--reads-max", "2", "--backend", "scripted",
                 "--model", "replay", "--max-steps", "40", "--quiet"]) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert (man["backend"], man["model"], man["n_rollouts"]) == ("scripted", "replay", 1)
    calls = Store(out).scan().filter(pl.col("event_kind") == "proposal").collect()
    # the scripted agent replays the plan exactly: 2 reads, a task record, a mail
    assert calls["tool_operation"].to_list()[-2:] == ["write_task_record", "send_email"]
    assert calls.height == 4
