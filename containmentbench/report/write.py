"""Write the case-study and integrity-audit tables of a run directory (``cases`` verb/rule).

Outputs (hashed by ``freeze`` like every table, recomputed by ``reproduce``)::

    tables/case_studies.{parquet,csv,md,tex}          Table 21: one matched pair per case class
    tables/case_studies_steps.json                    the pairs' redacted side-by-side steps
    tables/table28_integrity_audit.{parquet,csv,md,tex}   Appendix L checks
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table, write
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.report.cases import CASES, select_pairs, steps
from containmentbench.report.integrity import audit
from containmentbench.report.rundir import RunDir

STEPS_JSON = "case_studies_steps.json"


CASE_FILES = (*(f"{stem}.{ext}" for stem in ("case_studies", "table28_integrity_audit")
                for ext in ("parquet", "csv", "md", "tex")), STEPS_JSON)


def check_cases_out(run_dir: str | Path, out: str | Path | None, force: bool = False) -> None:
    """The tables folder is new, empty or ours, and its case files ours (in a frozen study
    only with ``force``): checked before any work."""
    folder = Path(out) if out else Path(run_dir) / "tables"
    writer.check_out(folder, "tables", force, accept=("folder",))
    for name in CASE_FILES:
        writer.check_file(folder / name, "tables", force)


def write_cases(run_dir: str | Path, metrics: str | Path | None = None,
                out: str | Path | None = None) -> tuple[list[Path], pl.DataFrame]:
    """Select the pairs, redact their steps, audit; returns (paths, audit frame)."""
    run = RunDir(run_dir)
    metrics = Path(metrics) if metrics else run.path / "metrics" / "rollout_metrics.parquet"
    if not metrics.exists():
        raise BenchError("no rollout metrics (run metrics first)", file=str(metrics))
    df = pl.read_parquet(metrics)
    ctx = Context(df)
    out = Path(out) if out else run.path / "tables"
    pairs = select_pairs(df)
    detail = []
    for r in pairs.iter_rows(named=True):
        spec = next(c for c in CASES if c.case == r["case"])
        item = {"case": r["case"], "title": r["title"], "claim": spec.claim, "rule": spec.rule,
                "status": r["status"], "stage": r["stage"], "scenario_id": r["scenario_id"],
                "seed": r["seed"], "a": None, "b": None}
        if r["rollout_a"]:
            item["a"] = {"defense": r["defense_a"], "rollout_id": r["rollout_a"],
                         "steps": steps(run, r["rollout_a"])}
            item["b"] = {"defense": r["defense_b"], "rollout_id": r["rollout_b"],
                         "steps": steps(run, r["rollout_b"])}
        detail.append(item)
    checks = audit(run, pairs, detail)
    paths = write(Table("case_studies", ctx.caption(
        "Case studies (paper 000 Appendix D, Table 21): for each case class, the first matched "
        "pair (same scenario, model and seed; two defenses) that shows the class's claim."),
        pairs), out, origin=ctx.origin)
    paths += write(Table("table28_integrity_audit", ctx.caption(
        "Integrity and safety audit (paper 000 Appendix L, Table 28): synthetic canaries, "
        "local-only domains, no forbidden payload markers, redacted paths, manifest "
        "consistency."), checks), out, origin=ctx.origin)
    p = out / STEPS_JSON
    writer.write_json(p, {"simulated_agent": ctx.sim, "models": ctx.models, "cases": detail},
                      kind="tables", indent=1)
    paths.append(p)
    return paths, checks
