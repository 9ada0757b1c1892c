"""`cim report`: the paper's Table 5 beside ours, with cells more than 2x apart flagged."""

from __future__ import annotations

import polars as pl

from containmentbench.cim.report import PAPER_AMB, table5


def _summary(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame([{
        "workflow": w, "method": m, "delta_s": 30.0, "log10_amb_median": x,
        "log10_amb_p95": x + 1, "cand_median": 3.0, "cand_p95": 9.0,
        "log10_amb_run_median": 40.0, "rec_median": 1.0, "rec_p05": 0.5, "prec_median": 0.2,
        "prec_p05": 0.01, "delegations_per_run": 500.0, "comp_median": 1.0, "comp_p95": 2.0,
        "comp_gt1": 0.3, "n_delegations": 10} for w, m, x in rows])


def test_table5_flags_cells_more_than_twice_off():
    assert PAPER_AMB[("W1", "B1")] == (169, 314) and PAPER_AMB[("W2", "B2")] == (107718, 107718)
    # W1 B1: 10^2.5 = 316 is 1.87x the paper's 169 (ok); 10^3 = 1000 is 5.9x (flagged)
    # W2 B0: 10^0.4 = 2.5 is 2.5x the paper's 1 (flagged)
    text = table5(_summary([("W1", "B1", 2.5), ("W2", "B0", 0.4), ("W3", "B1", 3.0)]))
    lines = {tuple(c.strip() for c in ln.split("|")[1:3]): ln for ln in text.splitlines()
             if ln.startswith("| W")}
    assert "| 1.87x | ok |" in lines[("W1", "B1")]
    assert "| 2.51x | DIFFERS" in lines[("W2", "B0")]
    assert "| 7.69x | DIFFERS" in lines[("W3", "B1")]
    assert "169 (314)" in lines[("W1", "B1")] and "130 (236)" in lines[("W3", "B1")]
