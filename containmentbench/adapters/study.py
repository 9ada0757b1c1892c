"""Studies over an external benchmark (``study.adapter``): shards and task selection.

A shard is one (model, defense, seed, suite) block; the suite takes the stage slot of our
shard paths (``traces/<model>/<defense>/seed=<s>/<suite>/shard-000``), so the pipeline's
path helpers, status and freeze work unchanged. The tasks of a shard are not fixed by the
plan: they are the eligible user tasks frozen by the suite's qualification (§6.4: "eligible
tasks are frozen before the attacked matrix"), and every injection task selected.
"""

from __future__ import annotations

from typing import Any

from containmentbench.errors import BenchError
from containmentbench.pipeline.shard import Shard, model_slug

ADAPTERS = ("agentdojo",)


def adapter_config(data: dict[str, Any]) -> dict[str, Any]:
    a = data["study"].get("adapter") or {}
    if a.get("name") not in ADAPTERS:
        raise BenchError(f"unknown adapter '{a.get('name')}' (known: {', '.join(ADAPTERS)})",
                         field="study.adapter.name")
    from containmentbench.adapters.agentdojo.tools import SUITES

    for i, s in enumerate(a["suites"]):
        if s not in SUITES:
            raise BenchError(f"unknown AgentDojo suite '{s}' (one of {', '.join(SUITES)})",
                             field=f"study.adapter.suites[{i}]")
    if a["pipeline"] not in ("ground_truth", "backend"):
        raise BenchError("must be ground_truth or backend (the configured backend)",
                         field="study.adapter.pipeline")
    if a["pipeline"] == "backend":
        b = data["backend"]
        if b["name"] not in ("openai", "vllm"):
            raise BenchError("the AgentDojo adapter serves a model with backend=vllm (the "
                             "engine in the job) or backend=openai (an OpenAI-compatible "
                             "server)", field="backend.name")
        if b["name"] == "vllm" and not (b.get("options") or {}).get("tool_parser"):
            raise BenchError("AgentDojo's pipeline takes the model's native tool calls: set "
                             "vLLM's tool parser for the model (e.g. "
                             "+backend.options.tool_parser=hermes for Qwen)",
                             field="backend.options.tool_parser")
        if b.get("tool_mode", "prompt") != "native":
            raise BenchError("AgentDojo's pipeline calls tools natively: use "
                             "backend.tool_mode=native", field="backend.tool_mode")
    for st in data["study"]["stages"]:
        if st not in ("clean", "security"):
            raise BenchError(f"stage '{st}' is not mapped by the AgentDojo adapter (clean, "
                             f"security; §6.4)", field="study.stages")
    for key in ("initial_pool", "freeze", "min_eligible", "max_user_tasks"):
        v = a.get(key, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise BenchError("must be a whole number >= 0", field=f"study.adapter.{key}")
    pool = int(a.get("max_user_tasks") or 0)
    if pool and a.get("initial_pool", 0) > pool:
        raise BenchError(f"the initial pool ({a['initial_pool']}) is larger than the candidate "
                         f"pool (max_user_tasks {pool})", field="study.adapter.initial_pool")
    if a.get("freeze", 0) and a["freeze"] < int(a.get("min_eligible", 1)):
        raise BenchError(f"freezing {a['freeze']} tasks cannot meet min_eligible "
                         f"{a['min_eligible']}", field="study.adapter.freeze")
    screen = list(a.get("screen_seeds") or [])
    if len(set(screen)) != len(screen):
        raise BenchError("a seed is listed twice", field="study.adapter.screen_seeds")
    return a


def adapter_shards(data: dict[str, Any]) -> list[Shard]:
    a = adapter_config(data)
    slug = model_slug(data)
    return [Shard(slug, d, int(seed), suite, 0, ())
            for d in data["study"]["defenses"] for seed in data["study"]["seeds"]
            for suite in a["suites"]]


def user_tasks(a: dict[str, Any], suite: str) -> list[str]:
    """The candidate pool of a suite: its user tasks in numeric order, the first
    ``max_user_tasks`` when set."""
    from containmentbench.adapters.agentdojo import tasks as T

    ids = T.sort_ids(T.suite(suite).user_tasks)
    n = int(a.get("max_user_tasks") or 0)
    return ids[:n] if n else ids


def injection_tasks(a: dict[str, Any], suite: str) -> list[str]:
    from containmentbench.adapters.agentdojo import tasks as T

    have = T.sort_ids(T.suite(suite).injection_tasks)
    want = list(a.get("injection_tasks") or [])
    if not want:
        return have
    missing = [t for t in want if t not in have]
    if missing:
        raise BenchError(f"no injection task '{missing[0]}' in AgentDojo suite '{suite}'",
                         field="study.adapter.injection_tasks")
    return want
