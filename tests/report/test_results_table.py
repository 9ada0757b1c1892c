"""Results as data: ``tables/results.parquet`` holds every number of every table with its
interval and count, each row naming the cell it comes from (every table is rebuilt from it
alone and compared cell by cell);
``containmentbench.results`` loads it and the traces, refusing bytes that differ from the
manifest. (Here, not under tests/analysis: it reads the frozen viewer run of conftest.)"""

from __future__ import annotations

import math
import shutil

import polars as pl
import pytest

from containmentbench import results
from containmentbench.analysis.late import table_path
from containmentbench.analysis.results import COLUMNS, N_COLUMNS, rebuild
from containmentbench.errors import BenchError
from containmentbench.metrics.glossary import TERMS

#: tables kept out of results.parquet: wall clock by design (the defenses' hook time, the
#: audit's time per unit, the jobs' throughput), and results itself
APART = ("results", "defense_overhead", "throughput", "audit/audit_overhead",
         "audit/audit_unit_cost")


def _table(run_dir, name):
    return pl.read_parquet(table_path(run_dir, name))


def _tables(run_dir):
    """Every table of the run: tables/, the figures' sources and the audit's tables (named
    audit/<stem>, as results.parquet names them), less the ones kept apart."""
    names = [p.stem for p in sorted((run_dir / "tables").glob("*.parquet"))]
    names += [p.stem for p in sorted((run_dir / "figures").glob("*_source.parquet"))]
    names += [f"audit/{p.stem}" for p in sorted((run_dir / "audit" / "tables").glob("*.parquet"))]
    return [n for n in names if n not in APART]


def _plain(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v)


def assert_tables_rebuild(run_dir):
    """Every numeric cell of every table of ``run_dir`` equals the cell rebuilt from
    ``tables/results.parquet`` alone (estimates, intervals by method, counts, clusters):
    a number missing from results.parquet, an interval attached to the wrong number or an
    ``n`` that is not the table's all fail here. Returns the tables checked."""
    res = pl.read_parquet(run_dir / "tables" / "results.parquet")
    names = _tables(run_dir)
    # a table without a number (an empty table of a stage the study lacks) has no row; its
    # cells are all null and so rebuild as null below
    assert set(res["source_table"].unique()) <= set(names)
    for name in names:
        t = _table(run_dir, name)
        got = rebuild(res, name, t.columns, t.height)
        for c in t.columns:
            if not t[c].dtype.is_numeric() or c in ("seed", "case"):
                continue
            want = [_plain(v) for v in t[c].to_list()]
            assert got[c].to_list() == want, (name, c)
    return names


def test_every_table_rebuilds_from_results_alone(run_dir):
    names = assert_tables_rebuild(run_dir)
    assert {"findings", "table11_utility", "table12_claim_critical", "table14_denominator_sensitivity",
            "table26_seed_variance", "fig04_source", "case_studies",
            "table28_integrity_audit"} <= set(names)


def test_the_pipeline_study_rebuilds_with_its_case_and_audit_tables(finished_smoke):
    """The smoke study as Snakemake runs it (cases and the provenance audit before the
    analysis): their tables rebuild from results.parquet too; the wall clock is not in it."""
    run = finished_smoke / "results" / "smoke" / "sim-default"
    names = assert_tables_rebuild(run)
    late = {"case_studies", "table28_integrity_audit", "audit/audit_gap"}
    assert late <= set(names)
    res = pl.read_parquet(run / "tables" / "results.parquet")
    assert late <= set(res["source_table"].unique())
    assert (run / "audit" / "tables" / "audit_overhead.parquet").exists()
    assert not set(APART) & set(res["source_table"].unique())
    gap = res.filter(pl.col("source_table") == "audit/audit_gap")
    assert gap["n"].null_count() == 0 and set(gap["statistic"]) == {"count"}


def test_a_wrong_count_or_interval_fails_the_rebuild(run_dir, tmp_path):
    """The rebuild is a check that can fail: a shifted n, a swapped interval or a dropped
    row of results.parquet each leave a cell that differs from its table."""
    res = pl.read_parquet(run_dir / "tables" / "results.parquet")
    t = _table(run_dir, "findings")
    ok = rebuild(res, "findings", t.columns, t.height)
    assert ok["n"].to_list() == [float(v) for v in t["n"].to_list()]
    bad_n = res.with_columns(pl.when(pl.col("source_table") == "findings")
                             .then(pl.col("n") + 1).otherwise(pl.col("n")).alias("n"))
    assert rebuild(bad_n, "findings", t.columns, t.height)["n"].to_list() != \
        ok["n"].to_list()
    swapped = res.with_columns(pl.col("ci_high").alias("ci_low"), pl.col("ci_low")
                               .alias("ci_high"))
    assert rebuild(swapped, "findings", t.columns, t.height)["ci_low"].to_list() != \
        ok["ci_low"].to_list()
    dropped = res.filter(~((pl.col("source_table") == "findings") & (pl.col("source_row") == 0)
                           & (pl.col("source_column") == "estimate")))
    assert rebuild(dropped, "findings", t.columns, t.height)["estimate"][0] is None
    # two rows that give one count cell two values cannot both be right
    clash = pl.concat([res, res.filter(pl.col("source_table") == "findings").head(1)
                       .with_columns(pl.col("source_column").alias("source_column"),
                                     (pl.col("n") + 5).alias("n"))])
    with pytest.raises(ValueError, match="findings row 0 column n"):
        rebuild(clash, "findings", t.columns, t.height)


def test_every_row_has_its_count_and_true_method(run_dir):
    """n on every number (null only for Table 24's parser counts when the reparse found no
    model action); n_clusters wherever the table states its scenarios; the Table 12
    endpoint rows keep their zero-event bound; no pooled or per-seed number is called a
    mean over rollouts."""
    r = pl.read_parquet(run_dir / "tables" / "results.parquet")
    assert r.filter(pl.col("n").is_null()).height == 0, \
        r.filter(pl.col("n").is_null()).select("source_table", "source_column").unique()
    t11 = r.filter(pl.col("source_table") == "table11_utility")
    t11_frame = _table(run_dir, "table11_utility")
    fp = t11.filter(pl.col("source_column").is_in(["fp_block", "fp_block_pooled"]))
    assert fp.height and all(
        x["n"] == t11_frame["fp_n"][x["source_row"]] for x in fp.iter_rows(named=True))
    assert set(fp["stage"]) == {"active_tainted"}
    clean = t11.filter(pl.col("source_column").is_in(["clean_completion",
                                                       "clean_excluded_provider_error"]))
    assert clean.height and set(clean["stage"]) == {"clean"}
    assert all(x["n"] == t11_frame["clean_n"][x["source_row"]] for x in clean.iter_rows(named=True))
    # Tables 13 and 14 (the sensitivity part): every mean with its scenario clusters
    sens = r.filter(pl.col("source_table").is_in(["table13_stage_contribution",
                                                  "table14_denominator_sensitivity"])
                    & (pl.col("statistic") == "mean"))
    assert sens.height and sens["n_clusters"].null_count() == 0
    assert set(sens["defense"]) == {"tool_boundary", "intent_ledger_v2"}
    pooled = r.filter(pl.col("source_column").str.ends_with("_pooled"))
    assert pooled.height and not pooled["method"].str.contains("eq. 7").any()
    assert pooled["statistic"].unique().to_list() == ["rate"]
    t26 = r.filter((pl.col("source_table") == "table26_seed_variance")
                   & (pl.col("source_column") == "estimate"))
    assert t26.height and t26["method"].str.contains("per-seed").all()
    assert t26["n_clusters"].null_count() == 0
    t12 = _table(run_dir, "table12_claim_critical")
    ends = [i for i, c in enumerate(t12["comparison"].to_list()) if c.endswith(" endpoint")]
    bound = r.filter((pl.col("source_table") == "table12_claim_critical")
                     & (pl.col("source_column") == "zero_event_bound"))
    assert sorted(bound["source_row"].to_list()) == ends
    assert (bound["statistic"] == "upper_bound").all() and bound["n"].null_count() == 0
    paired = r.filter((pl.col("source_table") == "table25_paired_comparisons")
                      & (pl.col("source_column") == "estimate"))
    assert set(paired["interval"]) == {"cluster", "pair"}
    assert paired.filter(pl.col("interval") == "cluster")["n_clusters"].null_count() == 0


def test_one_quantity_has_one_interval(run_dir):
    """A defense's mean of one metric over one stage scope (the same rollouts) carries the
    same scenario-cluster interval in every table that reports it: findings, the figures'
    sources, exposure and validity (one seed key per quantity, analysis/parallel.py).
    Utility by topology is over a topology's subset and is left out."""
    r = pl.read_parquet(run_dir / "tables" / "results.parquet").filter(
        (pl.col("statistic") == "mean") & (pl.col("interval") == "cluster")
        & (pl.col("comparison").is_null())
        & ~pl.col("source_table").is_in(["utility_by_topology", "defense_cost",
                                         "stack_attribution"]))
    groups = r.group_by("defense", "metric", "stage", "n").agg(
        pl.col("source_table").n_unique().alias("tables"),
        pl.col("ci_low").n_unique().alias("lows"), pl.col("ci_high").n_unique().alias("highs"),
        pl.col("source_table").unique().alias("names"))
    shared = groups.filter(pl.col("tables") > 1)
    assert shared.height >= 20  # findings beside fig03/fig04/fig05/fig06/exposure_validity
    assert shared.filter((pl.col("lows") > 1) | (pl.col("highs") > 1)).height == 0, \
        shared.filter((pl.col("lows") > 1) | (pl.col("highs") > 1))


def test_sql_without_quoting(run_dir):
    """No column of results.parquet is an SQL keyword: a plain query runs (polars SQL;
    duckdb takes the same text)."""
    res = pl.read_parquet(run_dir / "tables" / "results.parquet")
    ctx = pl.SQLContext(results=res)
    got = ctx.execute(
        "SELECT source_table, source_column, source_row, defense, estimate, ci_low, ci_high, "
        "n, n_clusters FROM results WHERE source_table = 'findings' AND metric = "
        "'committed_harm' AND source_column = 'estimate' ORDER BY source_row", eager=True)
    f = _table(run_dir, "findings").filter(pl.col("metric") == "committed_harm")
    assert got["defense"].to_list() == f["defense"].to_list()
    assert got["estimate"].to_list() == f["estimate"].to_list()
    assert got["n"].to_list() == f["n"].to_list()


def test_every_csv_says_whose_numbers_it_holds(run_dir):
    csvs = [p for d in ("tables", "figures", "audit/tables")
            for p in sorted((run_dir / d).glob("*.csv"))]
    assert any(p.parent.name == "figures" for p in csvs)
    for p in csvs:
        head = p.read_text().splitlines()[0].split(",")
        assert head[:4] == ["study", "model", "backend", "sim_agent"], p.name
        assert p.read_text().splitlines()[1].split(",")[3] == "true", p.name  # sim backend


def test_rows_name_metrics_by_their_glossary_key(run_dir):
    r = pl.read_parquet(run_dir / "tables" / "results.parquet")
    assert list(r.columns) == list(COLUMNS)
    t9 = r.filter(pl.col("source_table") == "table09_security_positive_control")
    assert set(t9["metric"].to_list()) >= {"committed_harm", "blast_radius_norm", "exposed",
                                           "fn_exact_proposal"}
    assert set(t9["stage"].to_list()) == {"security"}
    f = r.filter((pl.col("source_table") == "findings") & (pl.col("source_column") == "estimate"))
    assert set(f["metric"].to_list()) <= set(TERMS)
    assert (f["method"].str.contains("scenario-cluster").all()
            and f["n"].is_not_null().all() and f["n_clusters"].is_not_null().all())
    assert set(f["interval"]) == {"cluster"} and f["sim_agent"].all()
    d = r.filter((pl.col("source_table") == "table12_claim_critical")
                 & (pl.col("source_column") == "estimate"))
    assert d.height and set(d["statistic"]) == {"paired_delta"} and \
        d["comparison"].str.contains(" vs ").all()
    assert "N" not in N_COLUMNS and "n" in N_COLUMNS


def test_load_gives_polars_and_pandas(run_dir):
    r = results.load(run_dir, require_frozen=True)
    assert r.results.equals(pl.read_parquet(run_dir / "tables" / "results.parquet"))
    assert r.metrics.height == r.rollouts.height == 80
    assert r.events.height > r.rollouts.height and r.edges.height > 0
    assert set(r.events["rollout_id"].unique()) == set(r.rollouts["rollout_id"])
    assert r.headline["findings"] and r.table("table11_utility").height == 5
    pd = r.results.to_pandas()
    assert len(pd) == r.results.height and {"ci_low", "source_table"} <= set(pd.columns)
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
