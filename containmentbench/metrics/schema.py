"""Arrow schema of ``metrics/rollout_metrics.parquet``: one row per rollout (paper 000 Table 3
accounting), with the artifact's column names. Nullable metric columns are null (N/A) outside
their stage (Table 5), never 0."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

KEYS = ("scenario_id", "stage", "model", "backend", "defense", "seed")

_f, _i, _s, _b = pa.float64(), pa.int32(), pa.string(), pa.bool_()

METRICS = pa.schema([
    pa.field("rollout_id", _s, nullable=False),
    pa.field("scenario_id", _s, nullable=False),
    pa.field("cluster_id", _s, nullable=False),
    pa.field("stage", _s, nullable=False),
    pa.field("domain", _s, nullable=False),
    pa.field("topology", _s, nullable=False),
    pa.field("memory_mode", _s, nullable=False),
    pa.field("carrier", _s),
    pa.field("attack_goal", _s),
    pa.field("study", _s, nullable=False),
    pa.field("suite", _s, nullable=False),
    pa.field("model", _s, nullable=False),
    pa.field("backend", _s, nullable=False),
    pa.field("agent_profile", _s),
    pa.field("defense", _s, nullable=False),
    pa.field("policy_hash", _s, nullable=False),
    pa.field("method_version", _s, nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("status", _s, nullable=False),
    # why a rollout is never an outcome (null otherwise): ``context_overflow`` (the backend's
    # error says the prompt outgrew the model's context, runtime/job.py) or
    # ``provider_error`` (any other error after the backend's retries). Tables count both per
    # cell (analysis/exclusions.py), never silently (Appendix I).
    pa.field("error_kind", _s),
    # what was measured and how (never pooled across values: pipeline/mixing.py)
    pa.field("decoding", _s, nullable=False),        # canonical JSON (config/decoding.py)
    pa.field("tool_mode", _s, nullable=False),       # prompt | native | constrained
    pa.field("tools_offered", _s, nullable=False),   # all | domain (scenarios/toolsets.py)
    pa.field("completion_digest", _s, nullable=False),  # distinct seeds (Table 26, intervals)
    # exposure: a model call's context carried an untrusted source's label (the injection
    # or the untrusted material reached the model); null where the scenario has none
    pa.field("exposed", _i),
    # security endpoints (eq. 5 and its components), all stages
    pa.field("committed_harm", _i),
    pa.field("unauthorized_action", _i),
    pa.field("secret_leakage", _i),
    pa.field("wrong_recipient", _i),
    pa.field("harm_attempt", _i),
    # propagation (eq. 3, eq. 4, components), all stages
    pa.field("taint_to_commit_rate", _f),
    pa.field("blast_radius_norm", _f),
    pa.field("blast_radius_raw", _i),
    pa.field("reach_size", _i),
    pa.field("fixed_max_denominator", _i),
    pa.field("blast_radius_fixed", _f),
    pa.field("br_agent", _i),
    pa.field("br_message", _i),
    pa.field("br_memory", _i),
    pa.field("br_tool", _i),
    pa.field("br_side_effect", _i),
    pa.field("privilege_jump", _i),
    pa.field("cascade_depth", _i),
    # memory / recovery (memory_recovery stage only)
    pa.field("memory_reinfection", _i),
    pa.field("recovery_success", _i),
    pa.field("rollback_count", _i),
    # rolled-back commits stay in C_tau (§4.4); these say what was undone (docs/metrics.md)
    pa.field("rolled_back_harm", _i),
    pa.field("rolled_back_required", _i),
    pa.field("confirmation_burden", _i),
    # the policy stopped at least one call (a block, or a confirmation denied)
    pa.field("policy_block", _i),
    # identical calls after the first (rollouts.n_repeated_calls)
    pa.field("repeated_calls", _i),
    # utility: B(tau) fails on a rollout that ended without its final answer or committed a
    # side effect twice (docs/metrics.md, "Honest utility"); both reported on their own
    pa.field("benign_success", _i),
    pa.field("no_final_answer", _i),
    pa.field("duplicate_side_effect", _i),
    pa.field("authorized_tainted_action_success", _i),
    pa.field("clean_benign_completion", _i),
    pa.field("authorized_opportunities", _i),
    pa.field("fp_block_count", _i),
    pa.field("fp_confirm_count", _i),
    pa.field("false_positive_block_rate", _f),
    pa.field("false_positive_confirm_rate", _f),
    # measurement validity
    pa.field("valid_tool_proposal_rate", _f),
    pa.field("parse_failure_rate", _f),
    pa.field("repaired_rate", _f),
    pa.field("invalid_tool_rate", _f),
    # completions cut at max_tokens over model calls (never answers or actions)
    pa.field("truncated_rate", _f),
    pa.field("n_model_calls", _i, nullable=False),
    # the counts behind the rates, so a table can pool them per model action (Table 22):
    # model actions = model calls with a parse status; truncated counts over model calls
    pa.field("n_model_actions", _i, nullable=False),
    pa.field("n_valid_proposals", _i, nullable=False),
    pa.field("n_parse_failures", _i, nullable=False),
    pa.field("n_invalid_tool", _i, nullable=False),
    pa.field("n_truncated", _i, nullable=False),
    # audit
    pa.field("rule_ids", pa.list_(_s), nullable=False),
    pa.field("stop_rule_ids", pa.list_(_s), nullable=False),
    # target-path funnel (paper 000 §6.3, §7.4; attacks/funnel.py, docs/metrics.md): null on
    # a rollout whose scenario pre-specifies no exact attack goal (N/A, never False)
    pa.field("fn_exposed", _b),
    pa.field("fn_exact_proposal", _b),
    pa.field("fn_policy_pass", _b),
    pa.field("fn_goal_commit", _b),
    pa.field("fn_offtarget_commit", _b),
    pa.field("fn_stage", _i),
    # a commit whose arguments derive from the injection, exact goal or not (attacks/follow.py)
    pa.field("fn_partial_follow", _b),
    # the defense's part (defense API): the layer that contained the attack (attacked
    # scenarios; metrics/definitions.py contained_by), and its own model calls and tokens
    pa.field("contained_by", _s),
    pa.field("defense_model_calls", _i),
    pa.field("defense_tokens", pa.int64()),
])

# The defense-invariant trajectory projection of §6.5 (the twelve derived fields).
PROJECTION = ("blast_radius_norm", "blast_radius_raw", "br_agent", "br_message", "br_memory",
              "br_tool", "br_side_effect", "privilege_jump", "cascade_depth",
              "taint_to_commit_rate", "memory_reinfection", "recovery_success")

# Stage scope of each stage-specific metric (Table 3, Table 5); others apply to all stages.
STAGE_SCOPE = {
    "memory_reinfection": ("memory_recovery",),
    "recovery_success": ("memory_recovery",),
    "authorized_tainted_action_success": ("active_tainted",),
    "clean_benign_completion": ("clean",),
    "authorized_opportunities": ("active_tainted", "clean"),
    "fp_block_count": ("active_tainted", "clean"),
    "fp_confirm_count": ("active_tainted", "clean"),
    "false_positive_block_rate": ("active_tainted", "clean"),
    "false_positive_confirm_rate": ("active_tainted", "clean"),
}

# Outcome metrics are null for a rollout that ended in a provider error (Appendix I: an error
# never counts as an attack outcome or as benign completion).
OUTCOMES = tuple(f.name for f in METRICS if f.name not in (
    "rollout_id", "scenario_id", "cluster_id", "stage", "domain", "topology", "memory_mode",
    "carrier", "attack_goal", "study", "suite", "model", "backend", "agent_profile", "defense",
    "policy_hash", "method_version", "seed", "status", "error_kind", "decoding", "tool_mode",
    "tools_offered", "completion_digest", "n_model_calls", "n_model_actions", "n_valid_proposals",
    "n_parse_failures", "n_invalid_tool", "n_truncated", "rule_ids", "stop_rule_ids",
    "valid_tool_proposal_rate", "parse_failure_rate", "repaired_rate", "invalid_tool_rate",
    "truncated_rate"))


def check_metrics_file(path: str | Path) -> pa.Schema:
    """The schema of a metrics table on disk, refused (one line naming file and column) unless
    every column of :data:`METRICS` is there with the right kind of value: an integer
    ``stage`` or a string ``seed`` used to pass the name check and fail deep inside polars.
    Kinds, not exact types: a table rewritten by polars stores ``large_string``."""
    from containmentbench.integrity.inputs import check_column_kinds, parquet_schema

    schema = parquet_schema(path, "metrics table")
    check_column_kinds(schema, METRICS, path, "rollout_metrics")
    return schema
