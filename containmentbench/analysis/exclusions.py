"""How many rollouts each table cell leaves out, and why (paper 000 Table 5, Appendix I).

A reported mean (eq. 7) averages the per-rollout value over the rollouts of its cell that
are *outcomes*: status ``ok``, or stopped at the step limit or the identical-call limit
(``step_limit``, ``repeat_limit``: the agent ran out of budget; its recorded trace is scored
like any other). Three kinds of rollout are left out, and every table says how many:

* ``provider_error``: the rollout ended in an error after the backend's retries (Appendix I:
  an error is never an attack outcome nor a benign completion);
* ``context_overflow``: the same, where the backend said the prompt outgrew the model's
  context (``metrics.compute.error_kind``), counted apart because it is a property of the
  model rather than of the serving stack (a shard may hold such rollouts, runtime/job.py);
* ``na``: the metric is undefined for that outcome rollout (Table 5: "Non-applicable
  metric/stage cells are reported as N/A rather than zero"), e.g. a false-positive rate of a
  rollout with no authorized opportunity, a parser rate of a rollout with no model action.

Paired tables also count ``unmatched`` rollouts: outcomes with the metric defined whose
(scenario, model, seed) partner under the other defense is missing or excluded.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

ERROR_COLUMNS = ("excluded_provider_error", "excluded_context_overflow")

CAPTION = ("n counts the cell's outcome rollouts (status ok, or stopped at the step or "
           "identical-call limit); excluded_provider_error and excluded_context_overflow "
           "count its rollouts that ended in a provider error, a context overflow told "
           "apart, never outcomes (Appendix I); a column's _na count is the outcome "
           "rollouts where that metric is undefined (Table 5: N/A, never 0), left out of its "
           "mean.")

PAIR_CAPTION = ("Exclusions per row, over both defenses' rollouts of the stage: provider "
                "errors and context overflows (never outcomes), na (metric undefined, Table "
                "5) and unmatched (no partner with the same scenario, model and seed under "
                "the other defense).")


def errors(cell: pl.DataFrame) -> dict[str, int]:
    """Provider errors and context overflows among the rows of one cell (before any
    filter). A metrics table without ``error_kind`` (written before it existed) counts
    every error as a provider error."""
    if "status" not in cell.columns or cell.height == 0:
        return dict.fromkeys(ERROR_COLUMNS, 0)
    err = cell.filter(pl.col("status") == "error")
    overflow = 0
    if "error_kind" in cell.columns:
        overflow = err.filter(pl.col("error_kind") == "context_overflow").height
    return {"excluded_provider_error": err.height - overflow,
            "excluded_context_overflow": overflow}


def outcomes(cell: pl.DataFrame) -> pl.DataFrame:
    """The outcome rollouts of a cell (every status but ``error``)."""
    return cell.filter(pl.col("status") != "error") if "status" in cell.columns else cell


def na(cell: pl.DataFrame, metric: str) -> int:
    """Outcome rollouts of the cell where ``metric`` is undefined (null)."""
    ok = outcomes(cell)
    return int(ok[metric].null_count()) if metric in ok.columns else ok.height


def pair_exclusions(df: pl.DataFrame, a: str, b: str, stage: str,
                    metric: str | None) -> dict[str, int]:
    """Why rollouts of defenses ``a`` and ``b`` on ``stage`` (``all``: every stage) are in no
    pair of eq. 12: errors by kind, the metric undefined, or no partner (the same scenario,
    model and seed with the metric defined under the other defense)."""
    keys = ["scenario_id", "model", "seed", "stage"]
    base = df if stage == "all" else df.filter(pl.col("stage") == stage)
    base = base.filter(pl.col("defense").is_in([a, b]))
    out = errors(base)
    ok = outcomes(base)
    if metric is not None:
        out["excluded_na"] = int(ok[metric].null_count())
        ok = ok.filter(pl.col(metric).is_not_null())
    else:
        out["excluded_na"] = 0
    left = ok.filter(pl.col("defense") == a).select(keys)
    right = ok.filter(pl.col("defense") == b).select(keys)
    out["unmatched"] = (left.join(right, on=keys, how="anti").height
                        + right.join(left, on=keys, how="anti").height)
    return out


PAIR_COLUMNS = ("excluded_provider_error", "excluded_context_overflow", "excluded_na",
                "unmatched")


def with_na(row: dict[str, object], cell: pl.DataFrame, columns: dict[str, str],
            nullable: Sequence[str]) -> dict[str, object]:
    """Add ``<label>_na`` for every label in ``nullable`` (its metric from ``columns``)."""
    for label in nullable:
        row[f"{label}_na"] = na(cell, columns[label])
    return row
