"""Ranges of the numeric fields of the typed config (config/schema.py), checked before work.

A value out of range is a one-line error naming the dotted key, at ``config check``, at the
Snakefile's pre-flight and in the CLI flags that set the same quantity (``--window``,
``--max-steps``, ``--seed``, ``--workers``). ``backend.window=0`` used to hang the driver
forever; a negative seed or step budget used to be accepted.
"""

from __future__ import annotations

from typing import Any

from containmentbench.errors import BenchError

SEED_MAX = 2**31 - 1
# dotted key -> (low, high), both inclusive; None: unbounded on that side
BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "study.shard_size": (1, 1_000_000),
    "study.seeds": (0, SEED_MAX),                  # every element
    "model.max_model_len": (1, 10_000_000),
    "decoding.max_tokens": (1, 1_000_000),
    "decoding.temperature": (0.0, 2.0),
    "decoding.top_p": (0.0, 1.0),
    "backend.window": (1, 1_000_000),             # episodes in flight
    "runtime.max_steps": (1, 100_000),
    "runtime.max_agent_turns": (1, 100_000),
    "runtime.max_consecutive_errors": (1, 100_000),
    "runtime.max_calls_per_turn": (1, 1_000),
    "runtime.max_identical_calls": (0, 100_000),
    "cluster.cores": (1, 100_000),
    "cluster.gpus_per_job": (0, 64),
    "cluster.cpus_per_gpu_job": (1, 1_024),
    "cluster.mem_mb_gpu_job": (1, 100_000_000),
    "cluster.runtime_min_gpu_job": (1, 100_000),
    "cluster.mem_mb_cpu_job": (1, 100_000_000),
    "cluster.runtime_min_cpu_job": (1, 100_000),
    "cluster.metrics_workers": (1, 1_024),
    "analysis.resamples": (1, 100_000_000),
    "analysis.seed": (0, SEED_MAX),
    "analysis.max_batch_elements": (1, None),
    "analysis.validity.min_exposure": (0.0, 1.0),
    "workers": (1, 1_024),                         # --workers of metrics/reproduce
    # the bounded candidate search (paper 000 §6.3: 3 roots, branching 3, width 6, depth 4,
    # 2 restarts, at most 40 target queries per restart): a budget above these is refused
    "study.adaptive.roots": (1, 3),
    "study.adaptive.branching": (1, 3),
    "study.adaptive.width": (1, 6),
    "study.adaptive.depth": (0, 4),
    "study.adaptive.restarts": (1, 2),
    "study.adaptive.max_queries_per_restart": (1, 40),
    "study.adaptive.freeze_top": (1, 54),
    "study.adaptive.development_clusters": (1, 100_000),
    "study.adaptive.heldout_clusters": (1, 100_000),
    "study.adaptive.audit_clusters": (0, 100_000),
    "study.adaptive.search_seeds": (0, SEED_MAX),
    "study.adaptive.qualification_seeds": (0, SEED_MAX),
    "study.adaptive.split_seed": (0, SEED_MAX),
    "study.adaptive.known_good_rows": (0, 10_000),
    "study.adaptive.development_rollouts": (1, 100_000),
    "study.adaptive.heldout_rollouts": (1, 100_000),
    "study.adaptive.development_min_rate": (0.0, 1.0),
    "study.adaptive.heldout_min_rate": (0.0, 1.0),
    "study.adaptive.heldout_min_domains": (1, 3),
}


def check_value(key: str, value: Any, field: str | None = None) -> None:
    """One value (or every element of a list) against ``BOUNDS[key]``."""
    if value is None:
        return
    lo, hi = BOUNDS[key]
    values = value if isinstance(value, list) else [value]
    for i, v in enumerate(values):
        name = field or (f"{key}[{i}]" if isinstance(value, list) else key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise BenchError(f"must be a number (got {v!r})", field=name)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            low = "-inf" if lo is None else lo
            high = "inf" if hi is None else hi
            raise BenchError(f"{v!r} is out of range [{low}, {high}]", field=name)


def check_bounds(data: dict[str, Any]) -> None:
    """Every bounded key present in a resolved config."""
    for key in BOUNDS:
        *path, name = key.split(".")
        if not path:
            continue
        node: Any = data
        for part in path:  # nested sections (study.adaptive.*) too
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and name in node:
            check_value(key, node[name])
