"""The report's "Provenance audit (paper 001)" section: the audit's tables (audit/tables/, the
logged-vs-audited gap per stage and defense) are shown with their sha256 and checked against
the manifest of a frozen study like tables/; a run without an audit gets no such section."""

from __future__ import annotations

import re
import shutil

import polars as pl
import pytest

from containmentbench.audit.tables import gap_rows, gap_table
from containmentbench.canonical import sha256_file
from tests.conftest import run_cli

SECTION = "Provenance audit (paper 001)"


def _sinks(rollouts: list[dict]) -> list[dict]:
    """Two sinks per rollout with a known mix of logged and audited taint, so the gap columns
    of the table differ per row (the audit's own logic is pinned in tests/audit)."""
    out = []
    for i, r in enumerate(rollouts):
        for j in range(2):
            out.append({"rollout_id": r["rollout_id"], "stage": r["stage"],
                        "defense": r["defense"], "audited": (i + j) % 2 == 0,
                        "logged_node": (i * j) % 3 == 0, "fides": j == 1,
                        "flow_class": ("explicit", "implicit", "asynchronous")[(i + j) % 3],
                        "logged_field": j == 0, "sources": ["web"]})
    return out


@pytest.fixture(scope="module")
def audited(run_dir, tmp_path_factory):
    """The viewer run directory with an audit/ (gap table written by the audit's own writer),
    then the pipeline's order: report before freeze, freeze."""
    root = tmp_path_factory.mktemp("audited") / "smoke"
    shutil.copytree(run_dir, root)
    (root / "MANIFEST.json").unlink()
    (root / ".frozen-manifest.json").unlink()  # unfrozen: a study before its first freeze
    shutil.rmtree(root / "report")
    m = pl.read_parquet(root / "metrics" / "rollout_metrics.parquet").sort("rollout_id")
    rollouts = m.select("rollout_id", "stage", "defense", "model", "seed").to_dicts()
    sinks = _sinks(rollouts)
    rows = gap_rows(rollouts, sinks, {r["rollout_id"]: 1 for r in rollouts[::2]})
    assert gap_table(rows, sinks, root / "audit" / "tables", simulated=True)
    assert run_cli("report", root, "--before-freeze") == 0
    assert run_cli("freeze", root) == 0
    return root


def _section(index: str) -> str:
    return index.split('id="provenance-audit"')[1].split('<h2 id="figures">')[0]


def test_section_shows_every_gap_row_with_its_hash(audited):
    index = (audited / "report" / "index.html").read_text()
    assert SECTION in index
    sec = _section(index)
    gap = pl.read_parquet(audited / "audit" / "tables" / "audit_gap.parquet")
    assert gap.height >= 4  # several stages x five defenses
    digest = sha256_file(audited / "audit" / "tables" / "audit_gap.parquet")
    assert f"audit/tables/audit_gap.parquet sha256 {digest}" in sec
    table = sec.split('id="table-audit-audit_gap"')[1].split("</table>")[0]
    body = table.split("<tbody>")[1]
    trs = re.findall(r"<tr>(.*?)</tr>", body)
    assert len(trs) == gap.height
    for tr, row in zip(trs, gap.iter_rows(named=True), strict=True):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr)
        assert cells[:2] == [row["stage"], row["defense"]]
        assert cells[gap.columns.index("audited_not_logged")] == str(row["audited_not_logged"])
    assert "Simulated agent" in table  # the table's caption carries the sim label
    assert 'href="#t-audit-audit_gap"' in sec and 'id="t-audit-audit_gap"' in sec
    # linked inside the report folder: a copy of the study's bytes, hashed by freeze
    assert 'href="audit/tables/audit_gap.csv"' in sec and "../audit/" not in sec
    copy = audited / "report" / "audit" / "tables" / "audit_gap.csv"
    assert copy.read_bytes() == (audited / "audit" / "tables" / "audit_gap.csv").read_bytes()
    # the section's table is frozen with the rest: the manifest holds the same hash
    import json
    files = json.loads((audited / "MANIFEST.json").read_text())["files"]
    assert files["audit/tables/audit_gap.parquet"] == digest


def test_no_section_without_an_audit(run_dir):
    assert not (run_dir / "audit").exists()
    index = (run_dir / "report" / "index.html").read_text()
    assert SECTION not in index and "provenance-audit" not in index


def test_frozen_report_with_audit_rebuilds_byte_identical(audited, tmp_path):
    assert run_cli("report", audited, "--out", tmp_path / "r") == 0
    assert (tmp_path / "r" / "index.html").read_bytes() == \
        (audited / "report" / "index.html").read_bytes()


def test_tampered_audit_table_is_refused(audited, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(audited, copy)
    gap = copy / "audit" / "tables" / "audit_gap.parquet"
    pl.read_parquet(gap).with_columns(pl.lit(0).alias("audited_not_logged")) \
        .write_parquet(gap)
    before = (copy / "report" / "index.html").read_bytes()
    capsys.readouterr()
    assert run_cli("report", copy) == 2
    err = capsys.readouterr().err
    assert "fails verify" in err and "audit_gap.parquet" in err and err.count("\n") == 1
    assert (copy / "report" / "index.html").read_bytes() == before


def test_audit_table_missing_from_the_manifest_is_refused(audited, tmp_path, capsys):
    # audit/ is covered by the manifest: an audit table added after freeze fails verify, so
    # the report refuses the study before its own per-table check
    copy = tmp_path / "run"
    shutil.copytree(audited, copy)
    shutil.copyfile(copy / "audit" / "tables" / "audit_gap.parquet",
                    copy / "audit" / "tables" / "audit_late.parquet")
    capsys.readouterr()
    assert run_cli("report", copy, "--out", tmp_path / "r") == 2
    err = capsys.readouterr().err
    assert "audit/tables/audit_late.parquet: file added (not in MANIFEST.json)" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "r").exists()
