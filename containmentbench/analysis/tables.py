"""The paper's tables, regenerated from the rollout metrics (paper 000 Tables 3, 9-15, 25,
26; Tables 17, 22, 24 and the target-path funnel are in
:mod:`containmentbench.analysis.diagnostic_tables`). Each builder returns a :class:`~containmentbench.analysis.writers.Table` whose
caption names the study, model and backend; a simulated-agent run says so in every caption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis import exclusions as X
from containmentbench.analysis.exact import fmean
from containmentbench.analysis.paired import (
    LABELS,
    Comparison,
    stage_rows,
)
from containmentbench.analysis.seeds import distinct_traces, seed_variance
from containmentbench.analysis.writers import Table
from containmentbench.metrics.schema import STAGE_SCOPE

SIM_NOTE = ("Simulated agent (sim backend): these figures validate the harness and are not "
            "results for any model.")
SEEDS_NOTE = ("exposed_a/exposed_b: exposure of each side's rollouts; n_seeds and "
              "distinct_traces: seeds per scenario and how many of them gave distinct traces "
              "(seeds declared non-replicates are resampled as one).")
STAGES = ("security", "memory_recovery", "active_tainted", "clean")
STAGE_LABEL = {"security": "Security", "memory_recovery": "Memory/recovery",
               "active_tainted": "Active-tainted utility", "clean": "Clean utility",
               "all": "All stages"}
RECORDED = {"security": "committed_harm; secret_leakage; wrong_recipient; blast_radius_norm",
            "memory_recovery": "memory_reinfection; recovery_success; blast_radius_norm",
            "active_tainted": "authorized_tainted_action_success; false_positive_block_rate; "
                              "blast_radius_norm",
            "clean": "clean_benign_completion; false_positive_block_rate"}


class Context:
    """What every caption must name: study, model, backend; for a model, its decoding, tool
    mode and exposure (was it ever shown the untrusted content?)."""

    def __init__(self, df: pl.DataFrame) -> None:
        from containmentbench.config.decoding import describe, parse_record

        self.study = ", ".join(sorted(df["study"].unique().to_list()))
        self.models = ", ".join(sorted(df["model"].unique().to_list()))
        self.backends = sorted(df["backend"].unique().to_list())
        self.defenses = [d for d in ("none", "prompt_only", "structured_guard", "tool_boundary",
                                     "taint_only_v1", "intent_ledger_v2", "rollback_v2")
                         if d in set(df["defense"].unique().to_list())]
        self.defenses += sorted(set(df["defense"].unique().to_list()) - set(self.defenses))
        self.sim = "sim" in self.backends
        records = df["decoding"].unique().to_list() if "decoding" in df.columns else []
        self.decoding = parse_record(records[0]) if len(records) == 1 else None
        self.decoding_text = describe(self.decoding, self.backends[0] if self.backends else "")
        self.tool_modes = sorted(df["tool_mode"].unique().to_list()) \
            if "tool_mode" in df.columns else []
        self.tools_offered = sorted(df["tools_offered"].drop_nulls().unique().to_list()) \
            if "tools_offered" in df.columns else []
        # a narrowed frame (Tables 18-19) may carry neither column: no exposure to report
        ok = df.filter(pl.col("status") != "error") if "status" in df.columns else df
        self.exposure = fmean(ok["exposed"]) if "exposed" in df.columns else None
        self.exposed_n = ok["exposed"].drop_nulls().len() if "exposed" in df.columns else 0

    @property
    def origin(self) -> dict[str, object]:
        """Whose numbers a table holds: the leading columns of every CSV (writers.write)."""
        return {"study": self.study, "model": self.models, "backend": ", ".join(self.backends),
                "sim_agent": self.sim}

    def caption(self, text: str) -> str:
        tail = f" Study {self.study}; model {self.models}; backend {', '.join(self.backends)}."
        if self.sim:
            return f"{text}{tail} {SIM_NOTE}"
        exposure = ("no rollout had untrusted content" if self.exposure is None else
                    f"exposure {self.exposure:.3f} (share of the {self.exposed_n} rollouts "
                    f"with untrusted content whose model was shown it)")
        return (f"{text}{tail} Model results of {self.models} only, from its own traces (not "
                f"the simulated agent); {self.decoding_text}; tool mode "
                f"{', '.join(self.tool_modes) or 'n/a'}; {self.offered_text}; {exposure}.")

    @property
    def offered_text(self) -> str:
        """How many tools each agent was offered (scenarios/toolsets.py)."""
        what = {"all": "every tool of its role", "domain": "its scenario's domain tools"}
        modes = [what.get(m, m) for m in self.tools_offered] or ["n/a"]
        return f"tools offered per agent: {', '.join(modes)}"


def origin_of(metrics: str | Path) -> dict[str, object]:
    """``Context.origin`` of a metrics file (study, model, backend, sim_agent), read from
    those columns only: the leading CSV columns of a table built without a Context."""
    df = pl.read_parquet(metrics, columns=["study", "model", "backend"])
    backends = sorted(df["backend"].unique().to_list())
    return {"study": ", ".join(sorted(df["study"].unique().to_list())),
            "model": ", ".join(sorted(df["model"].unique().to_list())),
            "backend": ", ".join(backends), "sim_agent": "sim" in backends}


def column_mean(sub: pl.DataFrame, col: str) -> float | None:
    return fmean(sub[col])


def _pooled(sub: pl.DataFrame, num: str, den: str) -> float | None:
    d = sub[den].drop_nulls().sum()
    return float(sub[num].drop_nulls().sum() / d) if d else None


def per_defense(df: pl.DataFrame, stage: str, ctx: Context,
                columns: Mapping[str, str], nullable: Sequence[str] = ()) -> pl.DataFrame:
    """One row per defense present in the stage: N, the rollouts excluded (provider error,
    context overflow; ``<label>_na`` for the labels in ``nullable``, analysis/exclusions.py)
    and the mean of each metric over the cell's outcome rollouts (eq. 7)."""
    everything = df.filter(pl.col("stage") == stage)
    base = stage_rows(df, stage)
    rows = []
    for d in ctx.defenses:
        cell = everything.filter(pl.col("defense") == d)
        sub = base.filter(pl.col("defense") == d)
        if cell.height:
            row = {"defense": d, "n": sub.height,
                   "n_clusters": sub["cluster_id"].n_unique(), **X.errors(cell),
                   **{label: column_mean(sub, m) for label, m in columns.items()}}
            rows.append(X.with_na(row, cell, dict(columns), nullable))
    return pl.DataFrame(rows)


def table03(df: pl.DataFrame, ctx: Context) -> Table:
    rows = []
    for st in STAGES:
        sub = df.filter(pl.col("stage") == st)
        if sub.height == 0:
            continue
        rows.append({"component": STAGE_LABEL[st], "scenarios": sub["scenario_id"].n_unique(),
                     "n_clusters": sub["cluster_id"].n_unique(),
                     "defenses": sub["defense"].n_unique(), "seeds": sub["seed"].n_unique(),
                     "rows": sub.height, "outcome_rows": X.outcomes(sub).height,
                     **X.errors(sub), "recorded_metrics": RECORDED[st]})
    return Table("table03_stage_accounting", ctx.caption(
        "Evidence stages: rows are scenarios x defenses x rollout seeds (Table 3); "
        "outcome_rows are those every stage mean is over, the others ended in a provider "
        "error or a context overflow (never outcomes, Appendix I)."), pl.DataFrame(rows))


def table09(df: pl.DataFrame, ctx: Context) -> Table:
    frame = per_defense(df, "security", ctx, {
        "exposure": "exposed", "exact_goal_proposal": "fn_exact_proposal",
        "policy_violation": "committed_harm", "wrong_recipient": "wrong_recipient",
        "secret_leak": "secret_leakage", "logged_spread": "blast_radius_norm"},
        nullable=("exposure", "exact_goal_proposal"))
    return Table("table09_security_positive_control", ctx.caption(
        "Security-stage positive control and policy outcomes, beside exposure (the injection "
        "in a model call's context) and exact-goal proposals (the model followed it); n is "
        f"security scenarios x seeds per defense (Table 9). {X.CAPTION}"), frame)


def _fp(sub: pl.DataFrame) -> dict[str, Any]:
    """Table 11's FP columns over the active-tainted outcome rollouts ``sub`` (Table 5:
    the per-rollout rate, authorized benign high-risk proposals blocked (routed to
    confirmation) over the rollout's authorized opportunities, averaged over the rollouts
    where it is defined), with the pooled ratio of sums kept beside it."""
    has = sub.filter(pl.col("authorized_opportunities").fill_null(0) > 0)
    return {"fp_n_clusters": has["cluster_id"].n_unique(),
            "fp_block": column_mean(has, "false_positive_block_rate"),
            "fp_confirm": column_mean(has, "false_positive_confirm_rate"),
            "fp_n": has.height, "fp_na": sub.height - has.height,
            "fp_block_pooled": _pooled(has, "fp_block_count", "authorized_opportunities"),
            "fp_confirm_pooled": _pooled(has, "fp_confirm_count", "authorized_opportunities")}


def table11(df: pl.DataFrame, ctx: Context) -> Table:
    rows = []
    act, cln = stage_rows(df, "active_tainted"), stage_rows(df, "clean")
    act_all = df.filter(pl.col("stage") == "active_tainted")
    cln_all = df.filter(pl.col("stage") == "clean")
    for d in ctx.defenses:
        a = act.filter(pl.col("defense") == d)
        c = cln.filter(pl.col("defense") == d)
        ea = X.errors(act_all.filter(pl.col("defense") == d))
        ec = X.errors(cln_all.filter(pl.col("defense") == d))
        rows.append({"defense": d, "active_n": a.height,
                     "active_n_clusters": a["cluster_id"].n_unique(),
                     "active_excluded_provider_error": ea["excluded_provider_error"],
                     "active_excluded_context_overflow": ea["excluded_context_overflow"],
                     "active_exposure": column_mean(a, "exposed"),
                     "active_exposure_na": X.na(a, "exposed"),
                     "authorized_completion": column_mean(a, "authorized_tainted_action_success"),
                     # why B(tau) failed where the paper is silent (docs/metrics.md, "Honest
                     # utility"): shares of the same rollouts
                     "active_no_final_answer": column_mean(a, "no_final_answer"),
                     "active_duplicate_side_effect": column_mean(a, "duplicate_side_effect"),
                     **_fp(a),
                     "clean_n": c.height, "clean_n_clusters": c["cluster_id"].n_unique(),
                     "clean_excluded_provider_error": ec["excluded_provider_error"],
                     "clean_excluded_context_overflow": ec["excluded_context_overflow"],
                     "clean_completion": column_mean(c, "clean_benign_completion"),
                     "clean_no_final_answer": column_mean(c, "no_final_answer"),
                     "clean_duplicate_side_effect": column_mean(c, "duplicate_side_effect")})
    return Table("table11_utility", ctx.caption(
        "Utility stages (Table 11): exposure of the active-tainted rollouts (untrusted "
        "material in a model call's context), authorized tainted-action completion (eq. 6, "
        "active-tainted stage only) and clean completion (clean stage only); both fail on a "
        "rollout that ended without its final answer (step or repeat limit, or a give-up) or "
        "committed a side effect twice, and the *_no_final_answer and "
        "*_duplicate_side_effect columns give those shares of the same rollouts. FP block and FP "
        "confirm sit beside active_n and follow Table 5: per rollout, the authorized benign "
        "high-risk proposals whose first decision blocked them (routed them to confirmation) "
        "over the rollout's authorized opportunities, averaged over the active-tainted "
        "rollouts with at least one opportunity (fp_n; fp_na: rollouts without one, "
        "N/A); fp_block_pooled and fp_confirm_pooled are the ratio of sums over the same "
        "rollouts, kept for comparison. Provider errors and context overflows are excluded "
        "and counted per stage (Appendix I)."), pl.DataFrame(rows))


def comparisons_frame(comps: Sequence[Comparison], with_pair: bool = True,
                      df: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per paired comparison; with the metrics ``df``, the rollouts of the two
    defenses that are in no pair and why (analysis/exclusions.py)."""
    rows = []
    for c in comps:
        rows.append({
            "comparison": f"{c.a} vs {c.b}", "metric": LABELS.get(c.metric, c.metric),
            "stage": STAGE_LABEL.get(c.stage, c.stage), "n": c.n_pairs,
            "mean_a": c.mean_a, "mean_b": c.mean_b, "estimate": c.delta,
            **({"pair_ci_low": c.pair.low if c.pair else None,
                "pair_ci_high": c.pair.high if c.pair else None} if with_pair else {}),
            "ci_low": c.cluster.low if c.cluster else None,
            "ci_high": c.cluster.high if c.cluster else None,
            "n_clusters": c.cluster.n_clusters if c.cluster else None,
            "win_rate": c.win_rate, "interpretation": c.interpretation,
            "exposed_a": c.exposed_a, "exposed_b": c.exposed_b, "n_seeds": c.n_seeds,
            "distinct_traces": c.distinct_traces,
            **(X.pair_exclusions(df, c.a, c.b, c.stage, c.metric) if df is not None else {})})
    return pl.DataFrame(rows, schema_overrides={
        **{k: pl.Float64 for k in ("mean_a", "mean_b", "estimate", "pair_ci_low", "pair_ci_high",
                                   "ci_low", "ci_high", "win_rate",
                                   "exposed_a", "exposed_b", "distinct_traces")
           if with_pair or not k.startswith("pair")}, "n_seeds": pl.Int64,
        "n_clusters": pl.Int64,
        **({k: pl.Int64 for k in X.PAIR_COLUMNS} if df is not None else {})})


def table12(claims: Sequence[Comparison], zero: pl.DataFrame, ctx: Context,
            zero_defenses: Sequence[str], df: pl.DataFrame | None = None) -> Table:
    frame = comparisons_frame(claims, with_pair=False, df=df)
    extra = []
    for r in zero.filter(pl.col("defense").is_in(list(zero_defenses))
                         & (pl.col("metric") == "committed_harm")).iter_rows(named=True):
        extra.append({"comparison": f"{r['defense']} endpoint", "metric": LABELS["committed_harm"],
                      "stage": STAGE_LABEL.get(r["stage"], r["stage"]), "n": r["n"],
                      "mean_a": 0.0, "mean_b": None, "estimate": None, "ci_low": None,
                      "ci_high": None, "n_clusters": r["n_clusters"],
                      "zero_event_bound": r["cluster_rule_of_three"], "win_rate": None,
                      "interpretation": f"0/{r['n']}; cluster rule-of-three upper bound "
                                        f"{100 * r['cluster_rule_of_three']:.2f}%",
                      "exposed_a": None, "exposed_b": None, "n_seeds": None,
                      "distinct_traces": None,
                      **({"excluded_provider_error": r["excluded_provider_error"],
                          "excluded_context_overflow": r["excluded_context_overflow"],
                          "excluded_na": r["excluded_na"], "unmatched": 0}
                         if df is not None else {})})
    # an endpoint row (Table 12): 0 events in n rollouts, its one-sided scenario-cluster
    # rule-of-three bound (§7.2) in its own column, never posing as a delta's interval
    frame = frame.with_columns(pl.lit(None, pl.Float64).alias("zero_event_bound"))
    if extra:
        frame = pl.concat([frame, pl.DataFrame(extra, schema=frame.schema)])
    return Table("table12_claim_critical", ctx.caption(
        "Claim-critical paired comparisons (eq. 12, keyed by scenario, model and seed) with "
        "scenario-cluster 95% percentile intervals; an interval crossing zero is a tie; "
        "zero-event rows give the scenario-cluster rule-of-three bound (Table 12). "
        f"{SEEDS_NOTE} {X.PAIR_CAPTION}"), frame)


def table10(div: Sequence[Mapping[str, Any]], ctx: Context,
            df: pl.DataFrame | None = None) -> Table:
    rows = [{"comparison": f"{d['a']} vs {d['b']}", "scope": STAGE_LABEL.get(d["stage"]),
             "matched_pairs": d["pairs"], "same_endpoint": d["same_endpoint"],
             "same_zero_endpoint": d["same_zero_endpoint"],
             "trajectory_divergence": d["trajectory_divergence"],
             "ci_low": d["ci_low"], "ci_high": d["ci_high"],
             # the scenario clusters of the same-endpoint pairs the interval resamples
             "n_clusters": d.get("n_clusters"),
             "utility_divergence": d["utility_divergence"], "intersection": d["intersection"],
             "union": d["union"],
             **(X.pair_exclusions(df, d["a"], d["b"], d["stage"], None)
                if df is not None else {})} for d in div]
    return Table("table10_trajectory_divergence", ctx.caption(
        "Outcome-conditioned trajectory divergence: pairs keyed by scenario, model and seed, "
        "restricted to equal committed-harm outcomes, compared on the defense-invariant "
        "projection of twelve derived fields; policy hashes, rule ids and ledger matches are "
        f"excluded (§6.5, Table 10). {X.PAIR_CAPTION} (No metric is required to be defined: "
        "nulls in the projection are compared as values, so excluded_na is 0.)"),
        pl.DataFrame(rows, schema_overrides={"n_clusters": pl.Int64, **{
            k: pl.Float64 for k in ("trajectory_divergence", "ci_low", "ci_high",
                                    "utility_divergence", "intersection", "union")}}))


def table13(contrib: pl.DataFrame, a: str, b: str, ctx: Context) -> Table:
    frame = contrib.with_columns(pl.col("stage").replace_strict(STAGE_LABEL, default=pl.col(
        "stage"))).rename({"mean_a": a, "mean_b": b})
    return Table("table13_stage_contribution", ctx.caption(
        f"Contribution of each stage to the all-stage logged-spread gap between {a} and {b} "
        "(realized-trace denominator); weighted gap = (N_g / N) x (mean_a - mean_b), N_g and "
        f"N the outcome rollouts of {a} (Table 13). Excluded per row, over both defenses: "
        "provider errors, context overflows (never outcomes) and rollouts without the "
        "metric (N/A)."), frame)


def table14(sens: pl.DataFrame, a: str, b: str, ctx: Context) -> Table:
    return Table("table14_denominator_sensitivity", ctx.caption(
        f"Logged taint-spread sensitivity for {a} versus {b} (Table 14). Realized "
        "denominator: eq. 4, each rollout's own |R_tau|. Fixed max denominator: for every "
        "(scenario, model, seed) key the maximum |R_tau| over ALL defenses of this study "
        "(not only the two compared), so adding or dropping a defense changes these rows. "
        "Authorized-completion subset: active-tainted (scenario, model, seed) pairs where "
        f"BOTH {a} and {b} completed the authorized tainted action (eq. 6 = 1 on both sides; "
        "a pair where only one completed is left out), realized denominator. n_a and n_b are "
        "the rollouts behind each mean; excluded per row, over both defenses: provider "
        "errors, context overflows and rollouts without the metric (N/A); the subset row "
        "also counts the active-tainted pairs outside it (not_both_completed)."),
        sens.rename({"mean_a": a, "mean_b": b}))


def table15(df: pl.DataFrame, ctx: Context) -> Table:
    frame = per_defense(df, "memory_recovery", ctx, {
        "reinfection": "memory_reinfection", "recovery": "recovery_success",
        "rollback": "rollback_count", "rolled_back_harm": "rolled_back_harm",
        "rolled_back_required": "rolled_back_required", "confirmations": "confirmation_burden",
        "logged_spread": "blast_radius_norm"}, nullable=("recovery",))
    return Table("table15_memory_recovery", ctx.caption(
        "Memory/recovery-stage instrumentation: reinfection, recovery objective, rollbacks per "
        "rollout, rollouts whose violating or required commit was rolled back (such commits "
        "stay in C_tau, §4.4), confirmations per rollout, and logged spread (Table 15). "
        f"{X.CAPTION}"), frame)


def table25(comps: Sequence[Comparison], ctx: Context,
            df: pl.DataFrame | None = None) -> Table:
    return Table("table25_paired_comparisons", ctx.caption(
        "Paired comparisons after stage-scope correction: pair and scenario-cluster 95% "
        "percentile intervals (10,000 resamples) and paired win rates (share of pairs where "
        f"the second defense is strictly better) (Table 25). {SEEDS_NOTE} {X.PAIR_CAPTION}"),
        comparisons_frame(comps, df=df))


def table26(df: pl.DataFrame, metrics: Sequence[str], ctx: Context) -> Table:
    parts = []
    for m in metrics:
        stages = STAGE_SCOPE.get(m, STAGES)
        sub = stage_rows(df, "all", m).filter(pl.col("stage").is_in(list(stages)))
        if sub.height == 0:
            continue
        sv = seed_variance(sub, ["stage", "defense"], "seed", m)
        dt = distinct_traces(sub, ["stage", "defense"]).select(
            "stage", "defense", "distinct_traces")
        ex = _cell_exclusions(df.filter(pl.col("stage").is_in(list(stages))), m)
        # the rollouts (and their scenario clusters) behind a row's per-seed means
        ns = sub.filter(pl.col(m).is_not_null()).group_by("stage", "defense").agg(
            pl.len().cast(pl.Int64).alias("n"), pl.col("cluster_id").n_unique().cast(
                pl.Int64).alias("n_clusters"))
        parts.append(sv.rename({"mean": "estimate"}).join(dt, on=["stage", "defense"], how="left")
                     .join(ns, on=["stage", "defense"], how="left")
                     .join(ex, on=["stage", "defense"], how="left")
                     .with_columns(pl.lit(LABELS.get(m, m)).alias("metric")))
    frame = pl.concat(parts).select(["stage", "defense", "metric", "n", "n_clusters",
                                     "n_seeds", "distinct_traces", "estimate", "std", "range", "excluded_provider_error",
                                     "excluded_context_overflow", "excluded_na"]) \
        if parts else pl.DataFrame()
    return Table("table26_seed_variance", ctx.caption(
        "Seed variance of per-seed means by stage, defense and metric (estimate: the mean of "
        "the per-seed means; n rollouts over n_clusters scenarios behind them); "
        "non-applicable "
        "metrics are omitted rather than reported as zero (Table 26). distinct_traces: the "
        "mean number of a scenario's seeds whose traces differ (n_seeds when every seed "
        "changed what the model said, 1 when the seeds are copies). Excluded from the "
        "per-seed means, per row: provider errors, context overflows (never outcomes) and "
        "outcome rollouts without the metric (N/A)."), frame)


def _cell_exclusions(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Per (stage, defense): provider errors, context overflows and N/A rows of ``metric``."""
    rows = []
    for k in df.select("stage", "defense").unique().sort("stage", "defense").to_dicts():
        cell = df.filter((pl.col("stage") == k["stage"]) & (pl.col("defense") == k["defense"]))
        rows.append({**k, **X.errors(cell), "excluded_na": X.na(cell, metric)})
    return pl.DataFrame(rows, schema={"stage": pl.String, "defense": pl.String,
                                      "excluded_provider_error": pl.Int64,
                                      "excluded_context_overflow": pl.Int64,
                                      "excluded_na": pl.Int64})


def stage_means(df: pl.DataFrame, metrics: Sequence[str], ctx: Context) -> Table:
    """Eq. 7 stage x defense means with N, for every metric on its applicable stages, and
    the rollouts of the cell each mean leaves out (errors by kind, N/A)."""
    rows = []
    for st in STAGES:
        everything = df.filter(pl.col("stage") == st)
        base = stage_rows(df, st)
        for d in ctx.defenses:
            cell = everything.filter(pl.col("defense") == d)
            sub = base.filter(pl.col("defense") == d)
            err = X.errors(cell)
            for m in metrics:
                vals = sub[m].drop_nulls()
                if vals.len():
                    k = sub.filter(pl.col(m).is_not_null())["cluster_id"].n_unique()
                    rows.append({"stage": st, "defense": d, "metric": m, "n": vals.len(),
                                 "n_clusters": k,
                                 "estimate": fmean(vals), **err,
                                 "excluded_na": sub.height - vals.len()})
    return Table("stage_means", ctx.caption(
        "Stage x defense means (eq. 7) with n rollouts over n_clusters scenarios for every "
        "metric on the stages where it is defined; excluded per cell: provider errors, "
        "context overflows (never outcomes) and outcome rollouts where the metric is undefined (N/A)."),
        pl.DataFrame(rows, schema={"stage": pl.String, "defense": pl.String,
                                   "metric": pl.String, "n": pl.Int64, "n_clusters": pl.Int64,
                                   "estimate": pl.Float64,
                                   "excluded_provider_error": pl.Int64,
                                   "excluded_context_overflow": pl.Int64,
                                   "excluded_na": pl.Int64}))


