"""The labelled suite: Table 9's family counts, labels fixed in the committed files, and the
detectors on a few scenarios of each designed tier (bag-of-words embedder: logic, not model)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from containmentbench.audit.bench_suite import run_suite, votes
from containmentbench.audit.policy import load_audit_policy
from containmentbench.audit.suite import build, label
from containmentbench.cli.main import main
from containmentbench.scenarios.manifest import load_suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def suite():
    return load_suite(ROOT / "scenarios" / "taintbench")


def test_family_counts_are_table_9(suite) -> None:
    fam = Counter(label(s)["family"] for s in suite)
    assert fam == {"explicit_canary": 15, "string_provenance": 45, "semantic_explicit": 85,
                   "multi_fragment": 15, "implicit_control": 40, "non_propagating": 140,
                   "shared_clean": 40, "topical_overlap": 14, "prior_knowledge": 6}
    pos = Counter(label(s)["positive"] for s in suite)
    assert pos == {True: 200, False: 200}
    assert sum(label(s)["subfamily"] == "semantic_async" for s in suite) == 30


def test_committed_suite_is_the_generator_output() -> None:
    files = build()
    for name, data in files.items():
        assert (ROOT / "scenarios" / "taintbench" / name).read_bytes() == data, name
    assert main(["audit", "suite", "build", "--check", "--out",
                 str(ROOT / "scenarios" / "taintbench")]) == 0


def test_check_refuses_changed_labels(tmp_path: Path) -> None:
    files = build()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    line = (tmp_path / "security.jsonl").read_text().splitlines()
    rec = json.loads(line[0])
    rec["meta"]["taintbench"]["positive"] = not rec["meta"]["taintbench"]["positive"]
    line[0] = json.dumps(rec)
    (tmp_path / "security.jsonl").write_text("\n".join(line) + "\n")
    assert main(["audit", "suite", "build", "--check", "--out", str(tmp_path)]) == 2


def test_labels_name_an_existing_source_and_sink(suite) -> None:
    for s in suite:
        tb = label(s)
        assert tb["source_id"] in {u["source_id"] for u in s.untrusted}
        assert tb["sink_tool"] in load_audit_policy().sinks


def _pick(suite, subfamily: str, n: int = 2):
    return [s for s in suite if label(s)["subfamily"] == subfamily][:n]


def test_detectors_on_designed_cases(suite, bag, tmp_path: Path) -> None:
    pol = load_audit_policy()
    chosen = [*_pick(suite, "explicit_canary"), *_pick(suite, "string_provenance"),
              *_pick(suite, "implicit_control"), *_pick(suite, "semantic_async"),
              *_pick(suite, "shared_clean")]
    recs = run_suite(chosen, pol, bag, tmp_path, runs=3)
    v = {r["subfamily"] + r["scenario_id"][-3:]: r for r in votes(recs, pol.thresholds)}
    for key, row in v.items():
        if key.startswith("explicit_canary"):
            assert row["neurotaint"] and row["nt_tier"] == "canary"
        elif key.startswith("string_provenance"):
            assert row["neurotaint"] and row["nt_tier"] == "string"
        elif key.startswith("implicit_control"):
            # no content of the source in the sink: only the replay finds it
            assert row["neurotaint"] and row["nt_tier"] == "counterfactual"
            assert row["fides"]  # a structural path exists
        elif key.startswith("semantic_async"):
            assert not row["fides"]  # the lineage crosses a session through memory
        elif key.startswith("shared_clean"):
            assert not row["neurotaint"] and not row["fides"]
    assert (tmp_path / "traces" / "seed=0").is_dir()
