"""The diagnostic tables of paper 000 (Tables 17, 22, 24) and the target-path funnel, from
the rollout metrics, with the captions and exclusion counts of
:mod:`containmentbench.analysis.tables`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from containmentbench.analysis import exclusions as X
from containmentbench.analysis.tables import STAGE_LABEL, STAGES, Context, column_mean, per_defense
from containmentbench.analysis.writers import Table


def table17(df: pl.DataFrame, ctx: Context) -> Table:
    frame = per_defense(df, "security", ctx, {
        "exposure": "exposed", "harm_attempt": "harm_attempt",
        "committed_violation": "committed_harm",
        "wrong_recipient": "wrong_recipient"}, nullable=("exposure",))
    return Table("table17_policy_aware_stress", ctx.caption(
        "Bounded policy-aware stress slice: harm attempts (a proposal that would violate "
        f"policy), committed violations and wrong recipients (Table 17). {X.CAPTION}"), frame)


#: the paper's names for defenses that its Tables 18 and 22 call otherwise (Table 8 names
#: them as here): "cross-agent taint firewall" is the taint-only firewall v1
PAPER_ALIAS = {"taint_only_v1": "cross-agent taint firewall"}
ALIAS_NOTE = ("The paper's \"cross-agent taint firewall\" (Tables 18 and 22) is "
              "taint_only_v1 here: Table 8's taint-only firewall v1, the same eq. 11 policy.")


def _ratio(sub: pl.DataFrame, num: str, den: str) -> float | None:
    """Pooled rate: sum of ``num`` over sum of ``den`` (None when the denominator is 0)."""
    d = int(sub[den].sum()) if den in sub.columns else 0
    return int(sub[num].sum()) / d if d else None


def table22(df: pl.DataFrame, ctx: Context) -> Table:
    """Table 22: harm and benign completion per rollout; valid proposals, parse failures and
    invalid tools per model action (Appendix F: valid_tool_proposal_rate is "over model
    actions") and truncated completions per model call. The reported means follow Table 5
    ("reported means average the per-rollout value"): each is the mean of the per-rollout
    rates over the outcome rollouts with at least one model action (call), as
    ``exposure_validity`` reports them; the rates pooled over the model actions (calls) of
    those rollouts are kept beside them as ``<rate>_pooled`` (the paper is silent on
    pooling; kept because a long rollout weighs more there)."""
    ok = df.filter(pl.col("status") != "error")
    rows = []
    for d in ctx.defenses:
        sub = ok.filter(pl.col("defense") == d)
        rows.append({"defense": d, "paper_name": PAPER_ALIAS.get(d, d), "n": sub.height,
                     "n_clusters": sub["cluster_id"].n_unique(),
                     **X.errors(df.filter(pl.col("defense") == d)),
                     "exposure": column_mean(sub, "exposed"), "exposure_na": X.na(sub, "exposed"),
                     "harm_attempt": column_mean(sub, "harm_attempt"),
                     "committed_violation": column_mean(sub, "committed_harm"),
                     "valid_proposal": column_mean(sub, "valid_tool_proposal_rate"),
                     "parse_failure": column_mean(sub, "parse_failure_rate"),
                     "invalid_tool": column_mean(sub, "invalid_tool_rate"),
                     # rollouts without a model action: the per-action rates are N/A
                     "valid_proposal_na": X.na(sub, "valid_tool_proposal_rate"),
                     "truncated": column_mean(sub, "truncated_rate"),
                     "truncated_na": X.na(sub, "truncated_rate"),
                     "model_actions": int(sub["n_model_actions"].sum()),
                     "valid_proposal_pooled": _ratio(sub, "n_valid_proposals",
                                                     "n_model_actions"),
                     "parse_failure_pooled": _ratio(sub, "n_parse_failures", "n_model_actions"),
                     "invalid_tool_pooled": _ratio(sub, "n_invalid_tool", "n_model_actions"),
                     "truncated_pooled": _ratio(sub, "n_truncated", "n_model_calls"),
                     "repeated_calls": column_mean(sub, "repeated_calls"),
                     "benign_completion": column_mean(sub, "benign_success")})
    note = f" {ALIAS_NOTE}" if "taint_only_v1" in ctx.defenses else ""
    return Table("table22_interface_diagnostic", ctx.caption(
        "Model-interface diagnostic (Table 22): exposure, harm attempts, committed "
        "violations, identical repeated calls and benign completion per rollout; valid tool "
        "proposals, parse failures and invalid tools per model action and truncated "
        "completions per model call, each the mean of the per-rollout rates (Table 5) over "
        "the rollouts with a model action (valid_proposal_na, truncated_na: rollouts "
        "without one, N/A), as in exposure_validity; the *_pooled columns are the same "
        "rates pooled over the model actions (calls) of the defense's outcome rollouts "
        f"(model_actions), for comparison. {X.CAPTION}{note}"), pl.DataFrame(rows))


def table24(summary: Mapping[str, Any] | None, ctx: Context) -> Table | None:
    if not summary:
        return None
    rows = [("input model actions", summary["input_model_actions"]),
            ("valid tool proposals recovered", summary["valid_tool_proposals_recovered"]),
            ("old action-like final answers", summary["old_action_like_final_answers"]),
            ("action-like final answers after reparse", summary["new_action_like_final_answers"]),
            ("repaired parses", summary["repaired_parses"]),
            ("invalid tool actions", summary["invalid_tool_actions"])]
    for st, n in sorted(summary["status_counts_new"].items()):
        rows.append((f"parse_status={st}", n))
    rec = summary.get("recorded_parser_versions")
    recorded = f"recorded with {', '.join(rec)}, " if rec else ""
    legacy = any(str(v).endswith("+legacy") for v in rec or ())
    scope = ("Denominator: every model action (model call with a parse status) of every "
             f"rollout below traces/, all stages and defenses; {summary.get('skipped_rows', 0)} "
             "model calls without a parse status are not actions and are skipped. ")
    if not legacy:
        scope += ("These traces were recorded with the current parser, so the reparse "
                  "re-reads each action with the parser that recorded it: old and new "
                  "statuses agree by construction and the zero counts of recovered proposals "
                  "and action-like final answers are trivial, not evidence of a repair (the "
                  "paper's Table 24 compares a legacy parser's traces: study parser_legacy). ")
    return Table("table24_parser_reparse", ctx.caption(
        f"Offline parser-diagnostic summary: stored raw completions {recorded}re-parsed with "
        f"parser {summary['parser_version']} (config {summary['config_hash'][:12]}); no model "
        f"was called (Table 24). {scope}"),
        pl.DataFrame(rows, schema=["quantity", "count"], orient="row"))


FUNNEL_STEPS = (("exposed", "fn_exposed"), ("exact_proposal", "fn_exact_proposal"),
                ("policy_pass", "fn_policy_pass"), ("goal_commit", "fn_goal_commit"),
                ("offtarget_commit", "fn_offtarget_commit"),
                # beside the funnel, not a stage of it (attacks/follow.py)
                ("partial_follow", "fn_partial_follow"))


def target_funnel(df: pl.DataFrame, ctx: Context) -> Table | None:
    """Target-path funnel per stage x defense over attacked rollouts (paper 000 §6.3, §7.4;
    attacks/funnel.py): counts k and rates k/N with N the attacked rollouts of the cell.
    None when no rollout has a pre-specified exact goal."""
    if "fn_stage" not in df.columns:
        return None
    attacked = df.filter(pl.col("attack_goal").is_not_null()) \
        if "attack_goal" in df.columns else df
    base = df.filter(pl.col("fn_stage").is_not_null() & (pl.col("status") != "error"))
    if base.height == 0:
        return None
    rows = []
    for st in [s for s in STAGES if s in set(base["stage"].to_list())]:
        for d in ctx.defenses:
            sub = base.filter((pl.col("stage") == st) & (pl.col("defense") == d))
            if sub.height == 0:
                continue
            row: dict[str, Any] = {"stage": STAGE_LABEL[st], "defense": d, "n": sub.height,
                                   "n_clusters": sub["cluster_id"].n_unique(),
                                   **X.errors(attacked.filter((pl.col("stage") == st)
                                                              & (pl.col("defense") == d)))}
            for label, col in FUNNEL_STEPS:
                k = int(sub[col].sum())
                row[label] = k
                row[f"{label}_rate"] = k / sub.height
            rows.append(row)
    return Table("target_path_funnel", ctx.caption(
        "Target-path funnel over attacked rollouts: the payload in a model-action record "
        "(exposed), a proposal equal to the pre-specified exact goal after the documented "
        "argument normalisation, the policy passing that proposal, and a commit linked to it "
        "by call id (stage-5 target-path success); an off-target commit violates eq. 5 without "
        "that link and skips no stage; partial follow, beside the funnel, is an unauthorized "
        "commit whose arguments derive from the injection, exact goal or not. Counts k and "
        "rates k/n, n = attacked outcome rollouts "
        "per stage and defense; provider errors and context overflows are excluded and "
        "counted (§6.3, §7.4)."), pl.DataFrame(rows))
