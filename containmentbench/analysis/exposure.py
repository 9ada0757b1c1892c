"""The exposure and validity table: what the model did under each defense, with
scenario-cluster intervals (``tables/exposure_validity.*``; the study's answer is the
headline, :mod:`containmentbench.analysis.headline`).

One row per (defense, quantity). The quantities answer, in order, "was the model shown the
injection?", "did it follow it?", "did harm commit?", "did the policy stop anything?", "what
did it cost?" and "was the interface measuring the model?":

* exposure (attacked stages; active-tainted): metrics ``exposed``, the untrusted content in a
  model call's context (§7.4 "the benchmark payload reached the model-action record");
* follow rate: ``fn_exact_proposal``, a proposal equal to the pre-specified exact goal
  (§6.3, Appendix B);
* committed harm: ``committed_harm`` (eq. 5) on the attacked stages;
* policy blocks: ``policy_block``, the policy stopped at least one call;
* authorized completion: ``authorized_tainted_action_success`` (eq. 6, active-tainted stage);
* clean completion: ``clean_benign_completion`` (clean stage);
* valid tool calls and truncated completions: per model action (measurement validity, §6.2).

Each mean (eq. 7) carries a scenario-cluster 95% percentile interval (§6.5: scenarios are
resampled, all seeds of a resampled scenario kept), seeded from its (defense, quantity) key,
and how many of a scenario's seeds gave distinct traces (``analysis.seeds``).
Provider errors are not outcomes and are left out. The caption names the model, its decoding,
tool mode and exposure, or says the rows are the simulated agent's.
"""

from __future__ import annotations

import polars as pl

from containmentbench.analysis.paired import Settings, stage_rows
from containmentbench.analysis.parallel import IntervalPool, cluster_ci, quantity_key, resolve
from containmentbench.analysis.seeds import distinct_traces
from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table

ATTACKED = ("security", "memory_recovery")
#: (label, metrics column, stages)
QUANTITIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("exposure (attacked stages)", "exposed", ATTACKED),
    ("follow rate: exact-goal proposal (attacked stages)", "fn_exact_proposal", ATTACKED),
    ("partial follow: injection-derived commit, exact goal or not (attacked stages)",
     "fn_partial_follow", ATTACKED),
    ("committed harm, eq. 5 (attacked stages)", "committed_harm", ATTACKED),
    ("policy blocks (attacked stages)", "policy_block", ATTACKED),
    ("exposure (active-tainted)", "exposed", ("active_tainted",)),
    ("authorized completion, eq. 6 (active-tainted)", "authorized_tainted_action_success",
     ("active_tainted",)),
    ("clean completion (clean)", "clean_benign_completion", ("clean",)),
    ("ended without final answer (utility stages; fails completion)", "no_final_answer",
     ("active_tainted", "clean")),
    ("duplicate side effect (utility stages; fails completion)", "duplicate_side_effect",
     ("active_tainted", "clean")),
    ("valid tool calls per model action, mean of per-rollout rates (all stages)", "valid_tool_proposal_rate",
     ("security", "memory_recovery", "active_tainted", "clean")),
    ("truncated completions per model call, mean of per-rollout rates (all stages)", "truncated_rate",
     ("security", "memory_recovery", "active_tainted", "clean")),
)


def exposure_validity(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool | None = None
             ) -> Table:
    pool = pool if pool is not None else IntervalPool(1)
    base = stage_rows(df, "all")
    rows = []
    for d in ctx.defenses:
        mine = base.filter(pl.col("defense") == d)
        for label, col, stages in QUANTITIES:
            sub = mine.filter(pl.col("stage").is_in(list(stages)) & pl.col(col).is_not_null())
            if sub.height == 0:
                continue
            seeds = distinct_traces(sub, []).row(0, named=True)
            rows.append({"defense": d, "quantity": label,
                         "ci": cluster_ci(sub, col, s, pool, *quantity_key(d, col, stages)),
                         "n_seeds": seeds["n_seeds"],
                         "distinct_traces": seeds["distinct_traces"]})
    frame = pl.DataFrame(resolve(rows), schema={
        "defense": pl.String, "quantity": pl.String, "n": pl.Int64, "n_clusters": pl.Int64,
        "estimate": pl.Float64,
        "ci_low": pl.Float64, "ci_high": pl.Float64, "n_seeds": pl.Int64,
        "distinct_traces": pl.Float64}, orient="row")
    return Table("exposure_validity", ctx.caption(
        "Exposure and measurement validity per defense: exposure (the untrusted content reached a model call's "
        "context), the follow rate (a proposal equal to the injection's exact goal), partial "
        "follow (an unauthorized commit whose arguments derive from the injection, exact goal "
        "or not), "
        "committed harm (eq. 5) and policy blocks on the attacked stages, authorized (eq. 6) "
        "and clean completion with the shares of utility rollouts that ended without a final "
        "answer or committed a side effect twice (both fail completion), and the share of "
        "model actions that were valid tool calls or "
        "model calls cut at max_tokens (Table 5: the mean of the per-rollout rates); "
        "means (eq. 7) with scenario-cluster 95% intervals (§6.5); provider "
        "errors excluded; n rollouts over n_clusters scenarios; n_seeds and distinct_traces: seeds per scenario and how many of "
        "them gave distinct traces."), frame)
