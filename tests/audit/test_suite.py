"""The labelled suite: Table 9's counts in thirteen subfamilies, labels fixed and hashed in the
committed files, each label's control (a positive's sink disappears with its source
neutralised, a negative's does not change), and both detectors scored on a few rollouts of
each designed tier (bag-of-words embedder: logic, not model)."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from containmentbench.audit.bench_suite import ablations, votes
from containmentbench.audit.policy import load_audit_policy
from containmentbench.audit.study import audit_study
from containmentbench.audit.suite import FAMILIES, build, label, records
from containmentbench.audit.suite_check import LABELS, check_label_file, control
from containmentbench.cli.main import main
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.errors import BenchError
from containmentbench.scenarios.manifest import load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "scenarios" / "taintbench"


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE_DIR)


def test_family_counts_are_table_9_in_thirteen_subfamilies(suite) -> None:
    fam = Counter(label(s)["family"] for s in suite)
    assert fam == {"explicit_canary": 15, "string_provenance": 45, "semantic_explicit": 85,
                   "multi_fragment": 15, "implicit_control": 40, "non_propagating": 140,
                   "shared_clean": 40, "topical_overlap": 14, "prior_knowledge": 6}
    assert Counter(label(s)["positive"] for s in suite) == {True: 200, False: 200}
    sub = Counter(label(s)["subfamily"] for s in suite)
    assert len(sub) == 13 == len(FAMILIES)
    # Table 5: 30 asynchronous cross-session / cross-agent cases inside semantic evidence
    assert sub["cross_session"] + sub["cross_agent"] == 30


def test_committed_suite_is_the_generator_output() -> None:
    files = build(controls=False)
    assert LABELS in files
    for name, data in files.items():
        assert (SUITE_DIR / name).read_bytes() == data, name
    assert main(["audit", "suite", "build", "--check", "--out", str(SUITE_DIR)]) == 0


def _copy(tmp_path: Path) -> Path:
    for name, data in build(controls=False).items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


def test_check_refuses_changed_labels(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    lines = (d / "security.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["meta"]["taintbench"]["positive"] = not rec["meta"]["taintbench"]["positive"]
    lines[0] = json.dumps(rec)
    (d / "security.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["audit", "suite", "build", "--check", "--out", str(d)]) == 2


def test_scoring_refuses_a_label_file_that_does_not_match(tmp_path: Path, suite) -> None:
    d = _copy(tmp_path)
    assert check_label_file(d, suite[:3])
    body = json.loads((d / LABELS).read_text())
    first = next(iter(body["labels"]))
    body["labels"][first]["positive"] = not body["labels"][first]["positive"]
    (d / LABELS).write_text(json.dumps(body))
    with pytest.raises(BenchError) as exc:
        check_label_file(d, suite[:3])
    assert exc.value.field == "sha256" and "\n" not in exc.value.render()
    body["sha256"] = __import__("containmentbench.canonical", fromlist=["x"]).sha256_json(
        body["labels"])
    (d / LABELS).write_text(json.dumps(body))  # a consistent hash, but not the scenarios'
    with pytest.raises(BenchError, match="differs"):
        check_label_file(d, [s for s in suite if s.id == first])


def test_labels_name_an_existing_source_and_sink(suite) -> None:
    sinks = load_audit_policy().sinks
    for s in suite:
        tb = label(s)
        assert tb["source_id"] in {u["source_id"] for u in s.untrusted}
        assert tb["sink_tool"] in sinks and tb["sink_agent"] in s.agent_ids


def test_each_subfamily_holds_its_control() -> None:
    recs = {r["meta"]["taintbench"]["subfamily"]: r for stage in records().values()
            for r in stage}
    for sub, rec in recs.items():
        assert control(rec) is None, sub


def test_a_wrong_label_fails_its_control() -> None:
    """The build refuses a label its replay contradicts: the old semantic_async design (the
    session-2 sink in the benign plan) does not depend on its source."""
    rec = next(r for r in records()["security"]
               if r["meta"]["taintbench"]["subfamily"] == "cross_session")
    bad = json.loads(json.dumps(rec))
    sink = bad["plans"]["attack"].pop()            # the caused sink ...
    bad["plans"]["benign"].insert(-1, sink)        # ... scripted as the user's own step
    assert "still called" in control(bad)
    neg = next(r for r in records()["security"]
               if r["meta"]["taintbench"]["subfamily"] == "non_propagating")
    flipped = json.loads(json.dumps(neg))
    flipped["meta"]["taintbench"]["positive"] = True
    assert "still called" in control(flipped)


def test_detectors_on_designed_cases(tmp_path: Path, bag) -> None:
    save_resolved(load_study(["study=taintbench"]), tmp_path / "config.yaml")
    chosen = {"explicit_canary": 1, "string_provenance": 1, "implicit_control": 2,
              "cross_session": 1, "trusted_surface": 1, "shared_clean": 1}
    ids = [f"tb-{k}-{i:03d}" for k, n in chosen.items() for i in range(n)]
    for seed in (1, 2, 3):
        for stage in ("security", "clean"):
            mine = [i for i in ids if (stage == "clean") == i.startswith("tb-shared")]
            out = tmp_path / "traces" / "m" / "none" / f"seed={seed}" / stage / "shard-000"
            assert main(["rollout", "--suite", "taintbench", "--stage", stage, "--scenarios",
                         ",".join(mine), "--defense", "none", "--seed", str(seed), "--study",
                         "taintbench", "--sim-profile", "always_follow", "--out", str(out),
                         "--quiet"]) == 0
    log = io.StringIO()
    info = audit_study(tmp_path, load_audit_policy(), bag, log=log)
    assert info["labelled_suite"]
    tables = tmp_path / "audit" / "tables"
    for name in ("overall", "family", "subfamily", "evidence", "deciding_tier",
                 "explicit_only", "ablation", "sweep", "flow_classes", "paper", "votes"):
        assert (tables / f"taintbench_{name}.csv").is_file(), name
    import polars as pl

    v = {r["scenario_id"]: r for r in pl.read_parquet(
        tables / "taintbench_votes.parquet").to_dicts()}
    assert v["tb-explicit_canary-000"]["nt_tier"] == "canary"
    assert v["tb-string_provenance-000"]["nt_tier"] == "string"
    # no content of the source in the sink: only the replay finds it; FIDES declassifies
    for i in range(2):
        row = v[f"tb-implicit_control-{i:03d}"]
        assert row["neurotaint"] and row["nt_tier"] == "counterfactual" and not row["fides"]
    # across a session boundary the FIDES-style labels are lost, the DCPG keeps them
    for k in ("cross_session", "trusted_surface"):
        row = v[f"tb-{k}-000"]
        assert row["neurotaint"] and not row["fides"]
    assert not v["tb-shared_clean-000"]["neurotaint"]
    assert all(r["runs"] == 3 for r in v.values())
    abl = {r["configuration"]: r for r in pl.read_parquet(
        tables / "taintbench_ablation.parquet").to_dicts()}
    assert abl["without the causal analyzer (explicit evidence only)"]["recall_counterfactual"] \
        == 0.0
    assert abl["without canary"]["recall_canary"] in (0.0, 1.0)


def test_votes_need_a_majority_of_runs() -> None:
    """Majority vote over runs (§5.1): 2 of 3 flag -> detected; 1 of 3 -> not."""
    from containmentbench.audit.auditor import SinkAudit
    from containmentbench.audit.score import Pair

    tb = {"family": "f", "subfamily": "f", "positive": True, "evidence": "string",
          "source_id": "s", "sink_tool": "send_email", "sink_session": 1}

    def run(flag: bool, seed: int) -> dict:
        p = Pair("s", "src", [("content", "x")], retrieved=False, safe_control=False,
                 lcs_content=1.0 if flag else 0.0, bits_content=99.0 if flag else 0.0)
        sink = SinkAudit({}, 1, "send_email", {}, 1, [p], {}, {}, False, False, False)
        return {"label": tb, "scenario_id": "x", "seed": seed, "sinks": [sink]}

    th = load_audit_policy().thresholds
    assert votes([run(True, 1), run(True, 2), run(False, 3)], th)[0]["neurotaint"]
    assert not votes([run(True, 1), run(False, 2), run(False, 3)], th)[0]["neurotaint"]
    rows = ablations([run(True, 1)], th)
    assert {r["configuration"]: r["recall"] for r in rows}["without string"] == 0.0
