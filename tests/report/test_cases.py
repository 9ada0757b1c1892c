"""Case-study pairs (Table 21) and the integrity audit (Appendix L, Table 28)."""

from __future__ import annotations

import json
import re
import shutil

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from containmentbench.report.cases import CASES, REDACTED, redact, scenario_features
from containmentbench.report.integrity import _domain_local
from tests.conftest import run_cli


def test_every_pair_is_matched_and_shows_its_claim(run_dir):
    cases = pl.read_parquet(run_dir / "tables" / "case_studies.parquet")
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    by_id = {r["rollout_id"]: r for r in m.iter_rows(named=True)}
    assert cases["case"].to_list() == list(range(1, 9))
    found = cases.filter(pl.col("status") == "pair")
    # the smoke suite holds scenarios of three of Table 21's classes (cases 1, 5, 6); the
    # others are reported as not observed, never filled from another class
    assert set(found["case"].to_list()) <= {1, 5, 6} and found.height >= 2
    feats = scenario_features(m)
    for r in found.iter_rows(named=True):
        a, b = by_id[r["rollout_a"]], by_id[r["rollout_b"]]
        for k in ("scenario_id", "seed", "model", "stage"):
            assert a[k] == b[k]
        assert (a["defense"], b["defense"]) == (r["defense_a"], r["defense_b"])
        spec = next(c for c in CASES if c.case == r["case"])
        assert spec.pred(a, b) and spec.cls.holds(a, feats[(a["suite"], a["scenario_id"])])
        assert r["rule"].startswith("class: domain")
    for r in cases.filter(pl.col("case").is_in([2, 3, 4, 7, 8])).iter_rows(named=True):
        assert r["status"].startswith("not observed") and r["rollout_a"] is None
    for c1 in found.filter(pl.col("case") == 1).iter_rows(named=True):
        assert by_id[c1["rollout_a"]]["committed_harm"] == 1
        assert by_id[c1["rollout_b"]]["committed_harm"] == 0


def test_missing_class_is_reported_not_filled(run_dir, tmp_path):
    m = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet")
    only = m.filter(pl.col("defense").is_in(["none", "tool_boundary"]))
    only.write_parquet(tmp_path / "m.parquet")
    assert run_cli("cases", run_dir, "--metrics", tmp_path / "m.parquet", "--out",
                   tmp_path / "t") == 0
    cases = pl.read_parquet(tmp_path / "t" / "case_studies.parquet")
    row = cases.filter(pl.col("case") == 2).row(0, named=True)
    assert row["status"].startswith("not run") and row["rollout_a"] is None


def test_steps_are_redacted_and_audit_passes(run_dir):
    data = json.loads((run_dir / "tables" / "case_studies_steps.json").read_text())
    assert data["simulated_agent"] is True
    pair = next(c for c in data["cases"] if c["a"])
    assert {"proposal", "decision"} <= {s["kind"] for s in pair["a"]["steps"]}
    audit = pl.read_parquet(run_dir / "tables" / "table28_integrity_audit.parquet")
    assert set(audit["status"].to_list()) <= {"pass", "deferred"}
    assert audit.filter(pl.col("check") == "synthetic canaries")["items_checked"][0] > 0


def test_redaction_and_local_domains():
    assert redact("saved to /home/alice/out/x.json ok") == f"saved to {REDACTED} ok"
    assert redact(r"C:\Users\bob\x.txt") == REDACTED
    assert redact("docs/doc-1 and a/b") == "docs/doc-1 and a/b"
    assert _domain_local("corp.local") and _domain_local("x.example")
    assert not _domain_local("gmail.com")


def _copy_with_text_added(run_dir, tmp_path, kinds: tuple[str, ...], added: str):
    """A copy of the run whose first shard has ``added`` appended to the text of its first
    event of one of ``kinds`` (the shard's checksums are left as they were)."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    ev = sorted((copy / "traces").rglob("events.parquet"))[0]
    t = pq.read_table(ev)
    text = t.column("text").to_pylist()
    kind = t.column("kind").to_pylist()
    i = next(k for k, x in enumerate(text) if x and kind[k] in kinds)
    text[i] = text[i] + added
    t = t.set_column(t.schema.get_field_index("text"), "text", pa.array(text, pa.string()))
    pq.write_table(t, ev)
    return copy


def test_audit_fails_on_a_real_domain(run_dir, tmp_path, capsys):
    # an environment-side event (what the benchmark wrote), not model-written text
    copy = _copy_with_text_added(run_dir, tmp_path, ("source", "tool_result"),
                                 " cc someone@gmail.com")
    capsys.readouterr()
    assert run_cli("cases", copy, "--out", tmp_path / "t") == 1
    err = capsys.readouterr().err
    assert "integrity audit failed" in err
    audit = pl.read_parquet(tmp_path / "t" / "table28_integrity_audit.parquet")
    row = audit.filter(pl.col("check") == "local-only domains").row(0, named=True)
    assert row["status"] == "fail" and "gmail.com" in row["first_violation"]
    # the violation is named by its place: shard folder, rollout, column
    ev = sorted((copy / "traces").rglob("events.parquet"))[0]
    rel = ev.parent.relative_to(copy).as_posix()
    assert re.match(re.escape(rel) + r":r-[0-9a-f]+:text: ", row["first_violation"]), \
        row["first_violation"]
    # the edited shard no longer matches its checksums either
    row = audit.filter(pl.col("check") == "component-manifest consistency").row(0, named=True)
    assert row["status"] == "fail"


def test_audit_ignores_domains_the_model_wrote(run_dir, tmp_path):
    """A model's own text is an outcome: a completion cut off at max_tokens mid-address
    ('...@office.loca') or a model addressing a real domain is not a release violation."""
    from containmentbench.report.integrity import audit
    from containmentbench.report.rundir import RunDir

    copy = _copy_with_text_added(run_dir, tmp_path, ("model_call",),
                                 " to assistant@atlas-events-office.loca")
    row = audit(RunDir(copy)).filter(pl.col("check") == "local-only domains").row(0, named=True)
    assert row["status"] == "pass", row
