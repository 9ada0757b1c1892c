"""Results as data: ``tables/results.parquet`` holds every number of every table with its
interval, each row naming the cell it comes from (checked cell by cell against the tables);
``containmentbench.results`` loads it and the traces, refusing bytes that differ from the
manifest. (Here, not under tests/analysis: it reads the frozen viewer run of conftest.)"""

from __future__ import annotations

import math
import shutil

import polars as pl
import pytest

from containmentbench import results
from containmentbench.analysis.results import N_COLUMNS, _attached
from containmentbench.errors import BenchError
from containmentbench.metrics.glossary import TERMS


def _table(run_dir, name):
    p = run_dir / "tables" / f"{name}.parquet"
    return pl.read_parquet(p if p.exists() else run_dir / "figures" / f"{name}.parquet")


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=0, abs_tol=0)


def test_every_row_is_its_table_cell(run_dir):
    r = pl.read_parquet(run_dir / "tables" / "results.parquet")
    assert r.height > 1000
    cache = {}
    for x in r.iter_rows(named=True):
        t = cache.setdefault(x["table"], _table(run_dir, x["table"]))
        row = t.row(x["row"], named=True)
        assert _same(row[x["column"]], x["estimate"]), x
        if x["ci_lo"] is not None:  # the interval of that very number
            lo_hi = {("mean", "ci_low"), ("delta", "cluster_ci_low"), ("delta", "pair_ci_low"),
                     ("trajectory_divergence", "cluster_ci_low"),
                     (x["column"], f"{x['column']}_low")}
            assert any(_same(row.get(lo), x["ci_lo"]) and
                       _same(row.get(lo.replace("low", "high")), x["ci_hi"])
                       for col, lo in lo_hi if col == x["column"] and lo in row), x


def test_every_number_of_every_table_is_a_row(run_dir):
    r = pl.read_parquet(run_dir / "tables" / "results.parquet")
    have = {(t, i, c) for t, i, c in r.select("table", "row", "column").iter_rows()}
    tables = [p.stem for p in sorted((run_dir / "tables").glob("*.parquet"))
              if p.stem not in ("results", "case_studies", "table28_integrity_audit",
                                # wall clock, kept out of results.parquet by design
                                "defense_overhead")]
    tables += [p.stem for p in sorted((run_dir / "figures").glob("*_source.parquet"))]
    assert "findings" in tables and "table12_claim_critical" in tables
    missing = []
    for name in tables:
        t = _table(run_dir, name)
        skip = _attached(t.columns) | {"seed", "n_seeds"}
        for c in t.columns:
            if not t[c].dtype.is_numeric() or c in skip:
                continue
            for i, v in enumerate(t[c].to_list()):
                if v is not None and (name, i, c) not in have:
                    missing.append((name, i, c))
    assert missing == []


def test_rows_name_metrics_by_their_glossary_key(run_dir):
    r = pl.read_parquet(run_dir / "tables" / "results.parquet")
    t9 = r.filter(pl.col("table") == "table09_security_positive_control")
    assert set(t9["metric"].to_list()) >= {"committed_harm", "blast_radius_norm", "exposed",
                                           "fn_exact_proposal"}
    assert set(t9["stage"].to_list()) == {"security"}
    f = r.filter((pl.col("table") == "findings") & (pl.col("column") == "mean"))
    assert set(f["metric"].to_list()) <= set(TERMS)
    assert (f["method"].str.contains("scenario-cluster").all()
            and f["n"].is_not_null().all() and f["n_clusters"].is_not_null().all())
    d = r.filter((pl.col("table") == "table12_claim_critical") & (pl.col("column") == "delta"))
    assert d.height and set(d["statistic"]) == {"paired_delta"} and \
        d["comparison"].str.contains(" vs ").all()
    assert "N" in N_COLUMNS


def test_load_gives_polars_and_pandas(run_dir):
    r = results.load(run_dir, require_frozen=True)
    assert r.results.equals(pl.read_parquet(run_dir / "tables" / "results.parquet"))
    assert r.metrics.height == r.rollouts.height == 80
    assert r.events.height > r.rollouts.height and r.edges.height > 0
    assert set(r.events["rollout_id"].unique()) == set(r.rollouts["rollout_id"])
    assert r.headline["findings"] and r.table("table11_utility").height == 5
    pd = r.results.to_pandas()
    assert len(pd) == r.results.height and "ci_lo" in pd.columns
    assert results.runs(run_dir.parent) == [run_dir]


def test_a_changed_table_is_refused(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    p = copy / "tables" / "results.parquet"
    p.write_bytes(p.read_bytes() + b"\0")
    with pytest.raises(BenchError, match=r"results\.parquet: sha256 differs"):
        _ = results.load(copy).results
    assert results.load(copy).metrics.height == 80  # the rest is still readable
    with pytest.raises(BenchError, match="not a run directory"):
        results.load(tmp_path)
