"""The report() items the analysis rule declares exist after every analysis (a declared
output that is sometimes missing would fail the Snakemake job)."""

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
        assert {"mean", "ci_low", "ci_high"} <= set(df.columns)
    df = pl.read_parquet(run_dir / "figures" / "fig04_source.parquet")
    assert {"violation_low", "spread_high"} <= set(df.columns)


def test_coincident_points_share_one_label():
    from containmentbench.analysis.figures import _point_labels
    rows = [{"defense": d, "x": x, "y": y} for d, x, y in
            (("a", 0.5, 0.0), ("b", 0.5, 0.0), ("c", 0.505, 0.0), ("d", 0.1, 0.3))]
    labels = _point_labels(rows, "x", "y")
    assert sorted(t for _, _, t in labels) == ["a, b, c", "d"]
