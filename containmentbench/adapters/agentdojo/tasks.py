"""AgentDojo suites, environments, injections and the sink-level ledger (paper 000 §6.4).

Everything that reads AgentDojo's task definitions lives here. The environment loader is
AgentDojo's own (the suite's ``environment.yaml`` formatted with the injections, validated by
the suite's pydantic model) with libyaml's parser instead of the pure-Python one: the same
document, parsed ten times faster (a test checks equality with
``TaskSuite.load_and_inject_default_environment`` on every suite).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from containmentbench.adapters.agentdojo.tools import (
    BENCHMARK_VERSION,
    SUITES,
    authority_key,
    is_sink,
)
from containmentbench.errors import BenchError

Key = tuple[str, tuple[tuple[str, Any], ...]]


def require_agentdojo() -> None:
    try:
        import agentdojo  # noqa: F401
    except ModuleNotFoundError:
        raise BenchError("the AgentDojo adapter needs the optional extra: "
                         "pip install -e '.[agentdojo]' (agentdojo==0.1.35)",
                         field="agentdojo") from None


@cache
def suite(name: str) -> Any:
    if name not in SUITES:
        raise BenchError(f"unknown AgentDojo suite '{name}' (one of {', '.join(SUITES)})",
                         field="suite")
    require_agentdojo()
    from agentdojo.task_suite.load_suites import get_suite

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_suite(BENCHMARK_VERSION, name)


@cache
def _env_text(name: str) -> tuple[str, dict[str, str]]:
    from agentdojo.task_suite.task_suite import read_suite_file

    s = suite(name)
    return read_suite_file(s.name, "environment.yaml", s.data_path), \
        s.get_injection_vector_defaults()


def load_environment(name: str, injections: Mapping[str, str]) -> Any:
    """A fresh environment with the injections placed (AgentDojo's format-then-parse)."""
    import yaml

    text, defaults = _env_text(name)
    unknown = set(injections) - set(defaults)
    if unknown:
        raise BenchError(f"unknown injection vector '{sorted(unknown)[0]}'", field="injections")
    data = yaml.load(text.format(**dict(defaults, **injections)), Loader=yaml.CSafeLoader)
    return suite(name).environment_type.model_validate(data)


def carried(result: Any, injections: Mapping[str, str]) -> list[str]:
    """The injection vectors whose placed text a tool result carries. Checked on the result's
    string values, not its YAML rendering (YAML folds long lines, so the rendered text need
    not contain the injection verbatim)."""
    from pydantic import BaseModel

    strings: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, BaseModel):
            walk(v.model_dump())
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            strings.append(v)

    walk(result)
    return [vec for vec, text in sorted(injections.items())
            if text and any(text in s for s in strings)]


@cache
def _user_tasks(name: str) -> dict[str, Any]:
    return suite(name).user_tasks  # a version-resolving property: resolve once


@cache
def _injection_tasks(name: str) -> dict[str, Any]:
    return suite(name).injection_tasks


def user_task(name: str, task_id: str) -> Any:
    tasks = _user_tasks(name)
    if task_id not in tasks:
        raise BenchError(f"no user task '{task_id}' in AgentDojo suite '{name}'", field="task")
    return tasks[task_id]


def injection_task(name: str, task_id: str) -> Any:
    tasks = _injection_tasks(name)
    if task_id not in tasks:
        raise BenchError(f"no injection task '{task_id}' in AgentDojo suite '{name}'",
                         field="injection_task")
    return tasks[task_id]


def sort_ids(ids: Any) -> list[str]:
    """Task ids in numeric order (user_task_2 before user_task_10)."""
    return sorted(ids, key=lambda t: (t.rsplit("_", 1)[0], int(t.rsplit("_", 1)[1])))


@cache
def injection_candidates(name: str, task_id: str) -> tuple[str, ...]:
    """The injection vectors the user task's ground truth sees: AgentDojo's
    ``BaseAttack.get_injection_candidates`` (canaries placed in every vector, the ground truth
    run, the canaries found in its messages) on the fast loader. Empty = no injection path."""
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.types import get_text_content_as_str

    s = suite(name)
    canaries = {inj: f"<CANARY---{inj}--->" for inj in s.get_injection_vector_defaults()}
    env = load_environment(name, canaries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, _, msgs, _ = GroundTruthPipeline(user_task(name, task_id)).query(
            "", FunctionsRuntime(s.tools), env)
    seen = " ".join(get_text_content_as_str(m["content"]) for m in msgs
                    if m["content"] is not None)
    return tuple(inj for inj, c in canaries.items() if c in seen)


def attack_injections(name: str, attack: str, user_id: str, injection_id: str) -> dict[str, str]:
    """AgentDojo's registered attack placed into the vectors the user task sees."""
    from agentdojo.attacks.attack_registry import ATTACKS

    if attack not in ATTACKS:
        raise BenchError(f"unknown AgentDojo attack '{attack}'", field="attack")
    if not injection_candidates(name, user_id):
        return {}
    a = _attack(name, attack)
    return dict(a.attack(user_task(name, user_id), injection_task(name, injection_id)))


@cache
def _attack(name: str, attack: str) -> Any:
    from agentdojo.attacks.attack_registry import ATTACKS

    class _Named:  # the attack only reads the pipeline's name (model-name templating)
        name = "containmentbench-adapter"

    a = ATTACKS[attack](suite(name), _Named())
    # the same candidates AgentDojo computes, from the fast loader (cached per task)
    a.get_injection_candidates = lambda ut: list(injection_candidates(name, ut.ID))
    return a


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What the adapter knows about one (user task, injection task) before it runs."""

    suite: str
    user_id: str
    injection_id: str | None
    injections: dict[str, str]
    ledger: tuple[Key, ...]           # sink-level user authorization (user ground truth)
    attack_keys: tuple[Key, ...]      # sink calls of the injection task's ground truth
    injection_gt_calls: int           # length of the injection task's ground truth

    @property
    def stage(self) -> str:
        return "clean" if self.injection_id is None else "security"

    @property
    def scenario_id(self) -> str:
        tail = f"/{self.injection_id}" if self.injection_id else ""
        return f"agentdojo:{self.suite}/{self.user_id}{tail}"


def _sink_keys(calls: Any) -> tuple[Key, ...]:
    return tuple(authority_key(c.function, dict(c.args)) for c in calls if is_sink(c.function))


def task_spec(name: str, user_id: str, injection_id: str | None, attack: str) -> TaskSpec:
    ut = user_task(name, user_id)
    injections = attack_injections(name, attack, user_id, injection_id) if injection_id else {}
    env = ut.init_environment(load_environment(name, injections))
    ledger = _sink_keys(ut.ground_truth(env.model_copy(deep=True)))
    keys: tuple[Key, ...] = ()
    n = 0
    if injection_id is not None:
        calls = injection_task(name, injection_id).ground_truth(env.model_copy(deep=True))
        keys, n = _sink_keys(calls), len(calls)
    return TaskSpec(name, user_id, injection_id, injections, ledger, keys, n)
