"""What ``workflow/rules/agentdojo.smk`` needs from the package (per-model run directories).

Apart from ``adapters/study.py`` because these helpers ask the plan for shard keys and trace
folders, while the plan asks ``adapters/study.py`` for an adapter study's shards: the plan
sits between the two, so the imports run one way.
"""

from __future__ import annotations

from typing import Any

from containmentbench.pipeline.plan import shard_by_id, shard_key, trace_dir


def rule_shard_id(w: Any) -> str:
    """The shard id from the rollout rule's wildcards."""
    return f"{w.model}/{w.defense}/seed={w.seed}/{w.stage}/shard-{w.shard}"


def rule_shard_key(study: Any, w: Any) -> str:
    """A hash of everything that determines the shard (reruns it when that changes)."""
    data = study.run_data(w)
    return shard_key(data, shard_by_id(data, rule_shard_id(w)))


def rule_shard_outputs(study: Any) -> Any:
    """Input function: the SHA256SUMS of every shard of the ``{model}`` run."""
    return lambda w: [study.shard_output(s) for s in study.shards if s.model == w.model]


def rule_traces_dir(study: Any, w: Any) -> str:
    return str(trace_dir(study.run_data(w)))
