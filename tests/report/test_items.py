"""The report() items the analysis rule declares exist after every analysis (a declared
output that is sometimes missing would fail the Snakemake job), and a figure whose stage the
study lacks is neither drawn nor declared."""

from __future__ import annotations

from containmentbench.report.items import ANALYSIS_TABLES, CASE_TABLES, FIGURES


def test_declared_items_are_written(run_dir):
    for t in (*ANALYSIS_TABLES, *CASE_TABLES):
        assert (run_dir / "tables" / f"{t}.csv").exists(), t
    for f in FIGURES:
        assert (run_dir / "figures" / f"{f}.png").exists(), f


def test_figure_sources_carry_intervals(run_dir):
    import polars as pl
    for name in ("fig03", "fig05", "fig06"):
        df = pl.read_parquet(run_dir / "figures" / f"{name}_source.parquet")
        assert {"estimate", "ci_low", "ci_high", "n", "n_clusters"} <= set(df.columns)
    df = pl.read_parquet(run_dir / "figures" / "fig04_source.parquet")
    # glossary keys (one name per quantity), each with its interval
    assert {"committed_harm_low", "blast_radius_norm_high"} <= set(df.columns)


def test_figures_of_absent_stages_are_not_drawn(run_dir, tmp_path):
    """An AgentDojo-like study (clean and security only) gets no Fig. 3 (active-tainted) and
    no Fig. 6 (memory/recovery): never empty axes; the rule declares only what is drawn."""
    import polars as pl

    from containmentbench.analysis.figures import all_figures
    from containmentbench.analysis.outputs import figure_names
    from containmentbench.analysis.paired import Settings
    from containmentbench.analysis.tables import Context

    assert figure_names(["clean", "security"]) == ["fig04_operating_points",
                                                   "fig05_boundary_vs_ledger"]
    assert figure_names(["security", "memory_recovery", "active_tainted", "clean"]) == \
        list(FIGURES)
    df = pl.read_parquet(run_dir / "metrics" / "rollout_metrics.parquet").filter(
        pl.col("stage").is_in(["clean", "security"]))
    s = Settings(resamples=50, confidence=0.95, seed=1, max_batch_elements=1 << 20)
    tables, paths = all_figures(df, Context(df), s, ("tool_boundary", "intent_ledger_v2"),
                                tmp_path)
    assert sorted(p.name for p in paths if p.suffix == ".png") == [
        "fig04_operating_points.png", "fig05_boundary_vs_ledger.png"]
    assert [t.name for t in tables] == ["fig04_source", "fig05_source"]
