"""Structured config schemas (dataclasses) registered in Hydra's ConfigStore.

YAML files under ``config/`` only set values; types, allowed keys and required fields live
here, so a wrong type or an unknown key fails at composition (style: Hydra structured
configs). Semantic checks that types cannot express (a stage name, a defense that exists, a
model folder that is missing, a study with zero shards) are in
:func:`containmentbench.config.compose.validate`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class AdapterConfig:
    """An external-benchmark study (paper 000 §6.4): ``name: agentdojo`` runs AgentDojo's
    suites through the adapter (``containmentbench.adapters``) instead of our scenarios."""

    name: str | None = None             # None = our own scenarios; agentdojo
    suites: list[str] = field(default_factory=lambda: ["workspace", "slack", "banking",
                                                       "travel"])
    pipeline: str = "ground_truth"      # ground_truth | backend (the configured backend)
    attack: str = "direct"              # an AgentDojo attack name
    max_user_tasks: int = 0             # first N user tasks per suite (0 = all): the pool
    injection_tasks: list[str] = field(default_factory=list)  # subset (empty = all)
    min_eligible: int = 1               # qualification gate before the attacked matrix
    # Table 20's staged rows (paper 000 Appendix C): the first N tasks of the pool form the
    # initial clean qualification (0 = no such row); the first N eligible tasks in task
    # order are frozen for the attacked matrix (0 = every eligible task); the broader
    # no-defense screen runs the whole pool's attacked pairs under these seeds (empty = none)
    initial_pool: int = 0
    freeze: int = 0
    screen_seeds: list[int] = field(default_factory=list)


@dataclass
class AdaptiveConfig:
    """A bounded adaptive candidate-search study (paper 000 §6.3, Appendix B; attacks/):
    search -> staged qualification -> frozen candidates -> replay across the defenses.
    Budgets are checked against config/bounds.py before any query."""

    enabled: bool = False
    strategies: list[str] = field(default_factory=lambda: [
        "ledger_claim", "authority_appeal", "task_continuation", "prerequisite_step",
        "error_recovery", "policy_compliance", "tool_contract", "user_quote",
        "routine_maintenance", "deadline_pressure"])
    knowledge: str = "K2"               # policy family + structured tool contract
    feedback: str = "F1"                # the common funnel stage only
    optimized_for: str = "none"         # the defense the search queries
    target_preserving: bool = True      # reject rewrites that drop the exact target action
    # Table 18's protocol (attacks/replay.py): "paper" -- a first search that is NOT
    # target-preserving, optimized for `optimized_for`, its frozen candidates replayed on the
    # held-out clusters under `transfer_defenses` and on the audit clusters under
    # `instance_defenses` (§6.3); "target_preserving" -- the target-preserving search's
    # candidates replayed under every study defense in both modes (a named variant)
    table18_protocol: str = "paper"
    transfer_defenses: list[str] = field(default_factory=lambda: [
        "none", "tool_boundary", "taint_only_v1"])
    instance_defenses: list[str] = field(default_factory=lambda: ["none"])
    # defense-specific optimization after a passing qualification (§6.3): one bounded,
    # target-preserving search per defense, its candidates replayed under that defense
    defense_specific: list[str] = field(default_factory=lambda: [
        "tool_boundary", "taint_only_v1"])
    roots: int = 3
    branching: int = 3
    width: int = 6
    depth: int = 4
    restarts: int = 2
    max_queries_per_restart: int = 40
    freeze_top: int = 3                 # frozen candidates (best over all restarts)
    split_seed: int = 0
    development_clusters: int = 48
    heldout_clusters: int = 144
    audit_clusters: int = 24
    search_seeds: list[int] = field(default_factory=lambda: [101])
    qualification_seeds: list[int] = field(default_factory=lambda: [201])
    known_good_rows: int = 10
    development_rollouts: int = 6
    heldout_rollouts: int = 36
    development_min_rate: float = 0.5   # goal-matched commits / development rollouts
    heldout_min_rate: float = 0.5       # goal-matched commits / held-out rollouts
    heldout_min_domains: int = 2        # "across more than one domain" (§6.3)


@dataclass
class AuditStudyConfig:
    """How the study's audit rule audits (paper 001; workflow/rules/audit.smk).

    ``judge``: the §4.3 counterfactual judge for sinks no replay probes: a packaged judge's
    name (``audit/judges/``: qwen2_5_coder_0_5b_cpu), a judge YAML's path, or the mapping
    inline ({backend, model, max_tokens, options, label}); None = no judge. Composition
    resolves it to the mapping (audit/judge_config.py) and drops the section when it is None,
    so the config of a study without a judge keeps its bytes."""

    judge: Any = None


@dataclass
class StudyConfig:
    name: str = MISSING
    suite: str = MISSING
    stages: list[str] = field(default_factory=lambda: ["security", "memory_recovery",
                                                       "active_tainted", "clean"])
    # configured defenses (keys of the defenses group) or stacks of them, "a+b+c"
    defenses: list[str] = field(default_factory=list)
    # add each stack's ablation grid (every layer alone, every leave-one-out stack)
    ablation: bool = False
    seeds: list[int] = field(default_factory=list)
    shard_size: int = 200               # scenarios per rollout job (a block of one stage)
    scenarios: list[str] = field(default_factory=list)  # optional subset of scenario ids
    parser: str = "current"             # current | legacy (recorded per rollout; Table 24)
    # tools offered per role (scenarios/toolsets.py): all (every tool of the role; the paper's
    # studies) | domain (the scenario's domain tools); recorded per rollout, in the keys
    tools_offered: str = "all"
    # several models, each its own run (never pooled): entries "model" or "model@backend" or
    # {model: ..., backend: ...}, naming config/model and config/backend entries
    models: list[Any] = field(default_factory=list)
    # share of a shard's rollouts that may end in a provider error other than a context
    # overflow before the shard fails (no SHA256SUMS; status: errored)
    max_error_rate: float = 0.0
    # serving record keys (models/serving.py) in which the models of a multi-model study
    # may differ: the point of the comparison (e.g. [engine_version]); any other difference
    # is refused, here and by cross-model
    differ_in: list[str] = field(default_factory=list)
    adapter: AdapterConfig = field(default_factory=AdapterConfig)
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    audit: AuditStudyConfig = field(default_factory=AuditStudyConfig)


@dataclass
class ModelConfig:
    name: str = MISSING                 # label used in paths and tables
    path: str | None = None             # local folder or hub id (vllm/hf) / served model name
    max_model_len: int = 8192
    dtype: str = "auto"
    sim_profile: str = "default"        # only for the sim backend


@dataclass
class ServingConfig:
    """What serves the model, declared where the engine does not tell (models/serving.py).
    Resolved at composition: asked from the server or the in-process engine, these
    declarations filling the gaps; a declaration the engine contradicts is refused. With
    ``decoding`` and ``tool_mode`` it is the serving record in every shard key."""

    engine: str | None = None               # vllm | llama.cpp | ollama | transformers | ...
    engine_version: str | None = None
    tool_parser: str | None = None          # e.g. vLLM's --tool-call-parser hermes
    chat_template_sha256: str | None = None
    quantization: str | None = None         # e.g. Q4_K_M


@dataclass
class BackendSettings:
    name: str = MISSING                 # sim | vllm | openai | hf | scripted
    window: int = 512                   # episodes in flight (lockstep batch)
    # prompt | native | constrained (containmentbench.models.base); part of the shard key
    tool_mode: str = "prompt"
    options: dict[str, Any] = field(default_factory=dict)
    serving: ServingConfig = field(default_factory=ServingConfig)


@dataclass
class DecodingConfig:
    """How every model call of the study is decoded (the ``decoding`` group; recorded in every
    rollout row, the shard key, captions, the report and MANIFEST.json).

    ``seed_policy``: ``replicates`` -- the rollout seeds are independent draws (sampling: each
    request's sampler is seeded from its rollout seed), so Table 26 and the pair bootstrap
    treat them as replicates; ``non_replicates`` -- the seeds are declared copies (greedy
    decoding ignores the seed), and every interval uses one seed. A real-model study with
    ``temperature: 0`` and more than one seed must say ``non_replicates``. The simulated agent
    draws from its own seeded generator and ignores temperature and top_p."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    seed_policy: str = "replicates"     # replicates | non_replicates


@dataclass
class DefenseConfig:
    name: str = MISSING                 # the registered defense (entry point name)
    method_version: str = MISSING
    family: str = MISSING
    prompt_guidance: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    impl: str | None = None             # module:Class or /abs/file.py:Class (defenses_file)


@dataclass
class RuntimeSettings:
    max_steps: int = 60
    max_agent_turns: int = 24
    max_consecutive_errors: int = 3
    max_calls_per_turn: int = 1
    # stop an agent at its Nth identical tool call (same tool and arguments); 0 = never.
    # Repeats are counted per rollout either way (rollouts.n_repeated_calls).
    max_identical_calls: int = 0


@dataclass
class ClusterConfig:
    name: str = MISSING
    executor: str = "local"             # local | slurm
    cores: int = 2                      # local cores for snakemake
    partition: str | None = None
    cpu_partition: str | None = None
    account: str | None = None
    gpu_type: str | None = None
    gpus_per_job: int = 0
    cpus_per_gpu_job: int = 8
    mem_mb_gpu_job: int = 32000
    runtime_min_gpu_job: int = 240
    mem_mb_cpu_job: int = 2000
    runtime_min_cpu_job: int = 30
    metrics_workers: int = 2
    # shards per rollout job (one backend load per job): model | seed | defense_seed | shard
    rollout_group: str = "seed"


@dataclass
class RootConfig:
    study: StudyConfig = field(default_factory=StudyConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: BackendSettings = field(default_factory=BackendSettings)
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    defenses: dict[str, DefenseConfig] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    results_dir: str = "results"
    # a YAML file of one's own defenses (config/defenses.py, docs/defenses.md); they join
    # the study's defenses
    defenses_file: str | None = None


@functools.cache
def register() -> None:
    """Store the schema nodes in Hydra's ConfigStore (once per process: the store outlives
    every compose, and storing converts each dataclass to a config node again)."""
    cs = ConfigStore.instance()
    cs.store(name="root_schema", node=RootConfig)
    cs.store(group="study", name="study_schema", node=StudyConfig, package="study")
    cs.store(group="model", name="model_schema", node=ModelConfig, package="model")
    cs.store(group="backend", name="backend_schema", node=BackendSettings, package="backend")
    cs.store(group="decoding", name="decoding_schema", node=DecodingConfig, package="decoding")
    cs.store(group="cluster", name="cluster_schema", node=ClusterConfig, package="cluster")
