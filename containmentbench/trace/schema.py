"""Arrow schemas of the trace tables (design contract "Trace tables").

Three tables per shard: ``rollouts`` (one row per rollout), ``events`` (one row per logged
node of the trace graph, paper 000 eq. 1) and ``edges`` (directed influence edges with a
``propagates_taint`` flag: eq. 2 uses only those, eq. 4's structural reach uses all).
Wall-clock facts go to ``timings`` and are never hashed. Each file carries ``schema_version``
and its table name in the Parquet key-value metadata.
"""

from __future__ import annotations

import pyarrow as pa

# 2: events.origin and the "truncated" kind; rollouts.decoding, tool_mode, n_truncated,
#    n_repeated_calls, n_prefilled (issue "the first real measurement")
# 3: the defense API: events.layer (the layer of a stack that decided) and the kinds
#    task_plan, output_check, commit_check, answer_check, defense_model_call, defense_error;
#    rollouts.defense_code, defense_model_calls and defense tokens; timings.defense_hook_s
#    rollouts.tools_offered (tools offered per role, scenarios/toolsets.py)
SCHEMA_VERSION = "3"

_str = pa.string()
_lstr = pa.list_(pa.string())

EVENT_KINDS = (
    "source",          # untrusted content present in the world (U_tau)
    "user_goal",       # trusted goal given to an agent
    "delegate",        # a delegation minted by the gateway (root or child)
    "spawn",           # a new agent instance started under a delegation
    "model_call",      # one completion; raw text kept
    "proposal",        # a parsed, valid tool call proposed for execution
    "invalid_tool",    # a call naming a tool the agent does not have (never proposed)
    "parse_error",     # a completion that is neither a valid call nor a final answer
    "truncated",       # a completion cut at max_tokens (neither an action nor an answer)
    "dropped_call",    # a valid extra call beyond max_calls_per_turn (recorded, not run)
    "decision",        # the policy's allow/block/confirm with rule id and evidence
    "confirm_request", # a proposal routed to the confirmation path
    "confirmation",    # the confirmation outcome (approved / denied)
    "commit",          # a side effect applied to a benchmark-local sink
    "rollback",        # a committed side effect reverted
    "tool_result",     # the observation returned to the agent
    "message",         # an inter-agent message (delegated task, handoff note, worker result)
    "memory_write",    # a persistent-memory entry written (labels stored with it)
    "memory_read",     # a persistent-memory entry read back (labels restored)
    "scrub",           # a memory entry deleted or quarantined
    "final_answer",    # an agent's final answer
    "session_start",   # a new session over the same persistent memory
    # the defense API's hooks besides authorize/confirm (defense/api.py): each is recorded
    # only when a layer changed or flagged something, with its rule id and layer
    "task_plan",       # plan_task: guidance, tools kept, task rewritten before the first call
    "output_check",    # inspect_output: a tool's output rewritten, redacted, withheld, flagged
    "commit_check",    # after_commit: a commit the defense asked to revert
    "answer_check",    # check_answer: a final answer rewritten or withheld
    "defense_model_call",  # a model call a defense made (its cost)
    "defense_error",   # a hook raised or answered malformed: the rollout ends as an error
)

EVENTS = pa.schema([
    pa.field("rollout_id", _str, nullable=False),
    pa.field("seq", pa.int32(), nullable=False),
    pa.field("event_id", _str, nullable=False),
    pa.field("kind", _str, nullable=False),
    pa.field("session", pa.int8(), nullable=False),
    pa.field("tick", pa.int32(), nullable=False),          # logical clock, never wall time
    pa.field("agent_id", _str),
    pa.field("agent_instance", _str),
    pa.field("delegation_id", _str),
    pa.field("delegation_parent_id", _str),
    pa.field("principal_id", _str),
    pa.field("binding", _str),                             # bound | unbound (gateway)
    pa.field("call_id", _str),                             # links proposal/decision/commit/result
    pa.field("tool", _str),
    pa.field("action_semantic", _str),                     # CIM Tier-1 verb
    pa.field("direction", _str),                           # Tier-2 qualifiers
    pa.field("resource_class", _str),
    pa.field("resource_id", _str),
    pa.field("sensitivity_label", _str),
    pa.field("principal_scope", _str),
    pa.field("target_principal", _str),
    pa.field("target", _str),
    pa.field("args", _str),                                # canonical JSON
    pa.field("text", _str),                                # raw model text / observation
    pa.field("parse_status", _str),
    pa.field("repaired", pa.bool_()),
    pa.field("repairs", _lstr),
    pa.field("decision", _str),                            # allow | block | confirm | approved | denied
    pa.field("rule_id", _str),
    pa.field("evidence", _str),                            # canonical JSON of the policy's evidence
    pa.field("labels", _lstr, nullable=False),             # taint and provenance labels
    pa.field("trust", _str, nullable=False),               # trusted | untrusted
    pa.field("high_risk", pa.bool_()),
    pa.field("ledger_match", pa.bool_()),
    pa.field("tainted_fields", _lstr),
    pa.field("commit_id", _str),
    pa.field("outcome", _str),                             # success | failure | unknown
    pa.field("agent_hints", _str),                         # agent-provided context (untrusted)
    pa.field("integrity", _lstr),                          # gateway integrity signals
    pa.field("origin", _str),                              # proposals: null = the model's; prefill
    # model_call rows only (issue "traces say what the model saw"); wall-clock latency is in
    # TIMINGS.call_latency_s, never here, so traces stay byte-identical across runs
    pa.field("prompt_hash", _str),                         # sha256 of the rendered prompt
    pa.field("tool_mode", _str),                           # prompt | native | constrained
    pa.field("finish_reason", _str),                       # stop | length | ...
    pa.field("call_prompt_tokens", pa.int64()),
    pa.field("call_completion_tokens", pa.int64()),
    pa.field("attempts", pa.int32()),                      # provider attempts (retries + 1)
    pa.field("provider_error", _str),                      # the provider's error text
    pa.field("native_calls", _str),                        # vLLM's own tool parser (JSON)
    # the layer (a study's defense name; one of a stack's) that made a defense decision
    pa.field("layer", _str),
])

EDGES = pa.schema([
    pa.field("rollout_id", _str, nullable=False),
    pa.field("src", pa.int32(), nullable=False),
    pa.field("dst", pa.int32(), nullable=False),
    pa.field("kind", _str, nullable=False),
    pa.field("propagates_taint", pa.bool_(), nullable=False),
])

ROLLOUTS = pa.schema([
    pa.field("rollout_id", _str, nullable=False),
    pa.field("study", _str, nullable=False),
    pa.field("suite", _str, nullable=False),
    pa.field("scenario_id", _str, nullable=False),
    pa.field("scenario_hash", _str, nullable=False),
    pa.field("cluster_id", _str, nullable=False),
    pa.field("family", _str, nullable=False),
    pa.field("stage", _str, nullable=False),
    pa.field("domain", _str, nullable=False),
    pa.field("topology", _str, nullable=False),
    pa.field("memory_mode", _str, nullable=False),
    pa.field("carrier", _str),
    pa.field("attack_goal", _str),
    pa.field("model", _str, nullable=False),
    pa.field("backend", _str, nullable=False),
    pa.field("agent_profile", _str),                       # sim profile (null for real models)
    pa.field("defense", _str, nullable=False),
    pa.field("method_version", _str, nullable=False),
    pa.field("policy_hash", _str, nullable=False),
    pa.field("parser_version", _str, nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("provider_seed_supported", pa.bool_(), nullable=False),
    pa.field("seed_record", _str, nullable=False),         # seeds at scenario/runner/provider/trace level
    pa.field("status", _str, nullable=False),              # ok | step_limit | repeat_limit | error
    pa.field("error", _str),
    pa.field("n_events", pa.int32(), nullable=False),
    pa.field("n_model_calls", pa.int32(), nullable=False),
    pa.field("n_proposals", pa.int32(), nullable=False),
    pa.field("n_commits", pa.int32(), nullable=False),
    pa.field("n_blocked", pa.int32(), nullable=False),
    pa.field("n_confirm", pa.int32(), nullable=False),
    pa.field("n_invalid_tool", pa.int32(), nullable=False),
    pa.field("n_parse_error", pa.int32(), nullable=False),
    pa.field("n_truncated", pa.int32(), nullable=False),    # completions cut at max_tokens
    pa.field("n_repeated_calls", pa.int32(), nullable=False),  # identical calls after the first
    pa.field("n_prefilled", pa.int32(), nullable=False),    # prefilled steps (not model actions)
    pa.field("decoding", _str, nullable=False),            # canonical JSON (config/decoding.py)
    pa.field("tool_mode", _str, nullable=False),           # prompt | native | constrained
    pa.field("tools_offered", _str, nullable=False),       # all | domain (tools per role)
    # sha256 of what the model said (agent instance, text and finish reason of every model
    # call, in order): two seeds of one scenario and defense gave distinct traces iff these
    # differ (Table 26 and every interval report it)
    pa.field("completion_digest", _str, nullable=False),
    pa.field("prompt_tokens", pa.int64(), nullable=False),
    pa.field("completion_tokens", pa.int64(), nullable=False),
    pa.field("env_diff", _str, nullable=False),            # canonical JSON environment diff
    pa.field("final_answer", _str),
    # the defense's code identity (defense/identity.py: sha256 over each layer's sources)
    # and what its own model calls cost (a judge, a tool filter)
    pa.field("defense_code", _str, nullable=False),
    pa.field("defense_model_calls", pa.int32(), nullable=False),
    pa.field("defense_prompt_tokens", pa.int64(), nullable=False),
    pa.field("defense_completion_tokens", pa.int64(), nullable=False),
])

TIMINGS = pa.schema([
    pa.field("rollout_id", _str, nullable=False),
    pa.field("wall_s", pa.float64(), nullable=False),
    pa.field("model_s", pa.float64(), nullable=False),
    pa.field("host", _str, nullable=False),
    # the rollout job that ran the shard and its backend load time (the engine is loaded
    # once per job; load share = job_load_s / the job's wall time, also in the job log)
    pa.field("job", _str, nullable=False),
    pa.field("job_load_s", pa.float64(), nullable=False),
    pa.field("call_latency_s", pa.list_(pa.float64())),    # per model call, in trace order
    # the time the defense's hooks took (total, and per layer as canonical JSON)
    pa.field("defense_hook_s", pa.float64(), nullable=False),
    pa.field("defense_layers", _str, nullable=False),
])

TABLES: dict[str, pa.Schema] = {"rollouts": ROLLOUTS, "events": EVENTS, "edges": EDGES,
                                "timings": TIMINGS}
TRACE_TABLES = ("rollouts", "events", "edges")
