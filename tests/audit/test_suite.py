"""The labelled suite: Table 9's counts as the ``paper`` profile and the realistic negative mix
as the ``realistic`` one, labels fixed and hashed in the committed files, each label's
derivation (a positive's sink changes with its source, a negative's is derivable from the
trusted inputs alone) and realisation, and both detectors scored on a few rollouts of each
designed tier, the simulated agent's replay kept out of the detector's figures (bag-of-words
embedder: logic, not model)."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from containmentbench.audit.bench_suite import AUDITOR, CONFIGS, ORACLE, votes
from containmentbench.audit.policy import load_audit_policy
from containmentbench.audit.study import audit_study
from containmentbench.audit.suite import FAMILIES, build, counts, label, records, variants
from containmentbench.audit.suite_check import LABELS, check_label_file, derivation
from containmentbench.cli.main import main
from containmentbench.config.compose import load_study, save_resolved
from containmentbench.errors import BenchError
from containmentbench.scenarios.manifest import load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "scenarios" / "taintbench"


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE_DIR)


def test_paper_profile_is_table_9_in_thirteen_subfamilies(suite) -> None:
    paper = [s for s in suite if "paper" in label(s)["profiles"]]
    fam = Counter(label(s)["family"] for s in paper)
    assert fam == {"explicit_canary": 15, "string_provenance": 45, "semantic_explicit": 85,
                   "multi_fragment": 15, "implicit_control": 40, "non_propagating": 140,
                   "shared_clean": 40, "topical_overlap": 14, "prior_knowledge": 6}
    assert Counter(label(s)["positive"] for s in paper) == {True: 200, False: 200}
    sub = Counter(label(s)["subfamily"] for s in paper)
    assert len(sub) == 13
    # Table 5: 30 asynchronous cross-session / cross-agent cases inside semantic evidence
    assert sub["cross_session"] + sub["cross_agent"] == 30


def test_realistic_profile_shares(suite) -> None:
    real = [s for s in suite if "realistic" in label(s)["profiles"]]
    assert Counter(label(s)["positive"] for s in real) == {True: 200, False: 200}
    neg = Counter(label(s)["subfamily"] for s in real if not label(s)["positive"])
    # the shares stated in suite.py: 25/20/20/15/10/10 % of 200 negatives
    assert neg == {"topical_overlap": 50, "coincidental_values": 40, "non_propagating": 40,
                   "trusted_quote": 30, "prior_knowledge": 20, "shared_clean": 20}
    # both profiles are built once: the union, each scenario in at least one profile
    assert len(suite) == 520 and all(label(s)["profiles"] for s in suite)
    assert counts("paper")["non_propagating"] == 140 and len(FAMILIES) == 15


def test_no_negative_is_dictated_verbatim_and_subjects_vary(suite) -> None:
    subjects = set()
    for s in suite:
        tb = label(s)
        text = tb["sink_args"].get("text") or tb["sink_args"].get("body")
        if "subject" in tb["sink_args"]:
            subjects.add(tb["sink_args"]["subject"])
        if not tb["positive"] and text:
            assert text.lower() not in " ".join(s.goals).lower(), s.id
    assert "Digest" not in subjects and len(subjects) >= 20


def test_paraphrase_positives_keep_none_of_the_source_entities(suite) -> None:
    """Project, organisation, its domain, amount, date, account, bank: none reaches a
    semantic sink (the values the generator drew for the page, looked up independently in
    the page's own text first)."""
    from containmentbench.audit.suite import source_values

    checked = 0
    for s in suite:
        tb = label(s)
        if tb["evidence"] != "semantic":
            continue
        text = (tb["sink_args"].get("text") or tb["sink_args"].get("body")).lower()
        family, i = tb["subfamily"], int(s.id.rsplit("-", 1)[1])
        v = source_values(family, i)
        page = s.untrusted[0]["text"]
        entities = [v["project"], v["partner"], v["amount"], v["date"], v["acct"],
                    f"{v['pdomain']}.local", "Northwind"]
        seen = [e for e in entities if e in page]
        assert seen, s.id  # the page names its entities ...
        for e in seen:
            assert e.lower() not in text, (s.id, e)  # ... the paraphrase none of them
        checked += 1
    assert checked == 85


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
    from containmentbench.audit.suite_check import profiles_of
    from containmentbench.canonical import sha256_json

    body["profiles"] = profiles_of(body["labels"])

    def rehash() -> None:
        body["sha256"] = sha256_json({"labels": body["labels"], "profiles": body["profiles"]})
        (d / LABELS).write_text(json.dumps(body))

    rehash()  # a consistent hash, but not the scenarios'
    with pytest.raises(BenchError, match="differs"):
        check_label_file(d, [s for s in suite if s.id == first])
    # a scenario moved out of a profile's list (hash of the whole file made consistent)
    body["profiles"]["realistic"]["scenarios"].pop(0)
    rehash()
    with pytest.raises(BenchError) as exc:
        check_label_file(d, suite[:3])
    assert exc.value.field == "profiles"


def test_labels_name_an_existing_source_and_sink(suite) -> None:
    sinks = load_audit_policy().sinks
    for s in suite:
        tb = label(s)
        assert tb["source_id"] in {u["source_id"] for u in s.untrusted}
        assert tb["sink_tool"] in sinks and tb["sink_agent"] in s.agent_ids


def test_each_subfamily_holds_its_derivation() -> None:
    built, other = records(), {r["id"]: r for st in variants().values() for r in st}
    seen = set()
    for stage in built.values():
        for rec in stage:
            sub = rec["meta"]["taintbench"]["subfamily"]
            if sub not in seen:
                seen.add(sub)
                assert derivation(rec, other[rec["id"]]) is None, sub
    assert len(seen) == 15


def test_a_wrong_label_fails_its_derivation() -> None:
    """The build refuses labels the derivation contradicts, without running any agent."""
    built = records()["security"]
    other = {r["id"]: r for st in variants().values() for r in st}
    neg = next(r for r in built if r["meta"]["taintbench"]["subfamily"] == "topical_overlap")
    flipped = json.loads(json.dumps(neg))
    flipped["meta"]["taintbench"]["positive"] = True   # a negative called positive
    assert "planned unchanged" in derivation(flipped, other[neg["id"]])
    pos = next(r for r in built if r["meta"]["taintbench"]["subfamily"] == "string_provenance")
    flipped = json.loads(json.dumps(pos))
    flipped["meta"]["taintbench"]["positive"] = False  # a positive called negative
    assert "changes with the untrusted source" in derivation(flipped, other[pos["id"]])
    # a negative whose sink carries a number only the page holds is not trusted-derivable
    coinc = next(r for r in built
                 if r["meta"]["taintbench"]["subfamily"] == "coincidental_values")
    bad = json.loads(json.dumps(coinc))
    var = json.loads(json.dumps(other[coinc["id"]]))
    for rec in (bad, var):
        for st in rec["plans"]["benign"]:
            if st["tool"] in ("send_email", "post_status_note"):
                key = "body" if "body" in st["args"] else "text"
                st["args"][key] += " Ref 99173."
        tb = rec["meta"]["taintbench"]
        tb["sink_args"] = next(st["args"] for st in rec["plans"]["benign"]
                               if st["tool"] == tb["sink_tool"])
    assert "'99173' is not in the trusted inputs" in derivation(bad, var)


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
    for name in ("headline", "groups", "oracle", "oracle_groups", "semantic_auc", "family",
                 "subfamily", "evidence", "deciding_tier", "sweep", "flow_classes", "paper",
                 "votes"):
        assert (tables / f"taintbench_{name}.csv").is_file(), name
    assert (tables / "audit_unit_cost.csv").is_file()
    import polars as pl

    v = {r["scenario_id"]: r for r in pl.read_parquet(
        tables / "taintbench_votes.parquet").to_dicts() if r["profile"] == "paper"}
    assert v["tb-explicit_canary-000"]["nt_tier"] == "canary"
    assert v["tb-string_provenance-000"]["nt_tier"] == "string"
    # no content of the source in the sink: only the simulated agent's replay finds it, an
    # oracle: counted in the oracle upper bound, never in the detector's verdict
    for i in range(2):
        row = v[f"tb-implicit_control-{i:03d}"]
        assert row["neurotaint_oracle_upper_bound"] and not row["neurotaint"]
        assert not row["fides"]
    # across a session boundary the FIDES-style labels are lost, the DCPG keeps them (the
    # lineage reaches the sink: the replay probes it); the entity-free paraphrase is not
    # found by a bag-of-words embedder, so the detector's own verdict is not pinned here
    for k in ("cross_session", "trusted_surface"):
        row = v[f"tb-{k}-000"]
        assert row["neurotaint_oracle_upper_bound"] and not row["fides"]
    assert not v["tb-shared_clean-000"]["neurotaint"]
    assert all(r["runs"] == 3 for r in v.values())
    head = pl.read_parquet(tables / "taintbench_headline.parquet")
    assert set(head["profile"]) == {"paper", "realistic"}
    assert not any("oracle upper bound" in d for d in head["detector"])
    orc = pl.read_parquet(tables / "taintbench_oracle.parquet")
    assert all("oracle upper bound" in d for d in orc["detector"])
    paper = {r["detector"]: r for r in head.to_dicts() if r["profile"] == "paper"}
    full = paper[f"NeuroTaint: {AUDITOR.name}"]
    assert full["precision_lo"] <= full["precision"] <= full["precision_hi"]
    # without explicit evidence nothing is lost here: a verbatim copy is also a paraphrase of
    # itself, and Tiers 3-4 (sentence units) find it
    assert paper["NeuroTaint: without explicit (canary, string)"]["tp"] <= full["tp"]


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
    without = next(c for c in CONFIGS if c.name.startswith("without explicit"))
    assert not votes([run(True, 1)], th, without)[0]["neurotaint"]


def test_simulated_replay_is_an_oracle_and_kept_apart() -> None:
    """A cause found by the simulated agent's replay counts only in the oracle rows; a real
    model's replay or the judge count in the detector's; a recorded causal_source wins."""
    from containmentbench.audit.auditor import SinkAudit
    from containmentbench.audit.score import Pair

    tb = {"family": "f", "subfamily": "f", "positive": True, "evidence": "counterfactual",
          "source_id": "s", "sink_tool": "send_email", "sink_session": 1}

    def run(backend: str, tier: str = "counterfactual", recorded: str | None = None) -> dict:
        p = Pair("s", "src", [("content", "x")], retrieved=False, safe_control=False,
                 cause=True, cause_tier=tier)
        sink = SinkAudit({"backend": backend}, 1, "send_email", {}, 1, [p], {}, {}, False,
                         False, False)
        if recorded:
            sink.extra["causal_source"] = recorded
        return {"label": tb, "scenario_id": "x", "seed": 1, "sinks": [sink]}

    th = load_audit_policy().thresholds
    assert not votes([run("sim")], th)[0]["neurotaint"]
    assert votes([run("sim")], th, ORACLE)[0]["neurotaint"]
    assert votes([run("vllm")], th)[0]["neurotaint"]
    assert votes([run("sim", "judge")], th)[0]["neurotaint"]
    assert not votes([run("vllm", recorded="replay_sim_oracle")], th)[0]["neurotaint"]
    assert votes([run("sim", recorded="replay_real")], th)[0]["neurotaint"]
