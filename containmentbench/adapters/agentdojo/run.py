"""Run AgentDojo tasks natively and through the adapter; build a shard's tables.

One rollout is one user task (stage ``clean``) or one (user task, injection task) pair
(stage ``security``) under one defense and seed. Each is run twice under the frozen clock:
by AgentDojo alone (the native labels) and through :mod:`gateway` (the trace and the adapter
labels). Both get a freshly loaded environment with the same injections and the same
pipeline, so where the defense did not intervene the two runs must agree (§6.4 endpoint
parity). A single attempt per run (AgentDojo retries an empty model output up to three times;
the adapter records it instead).
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from containmentbench.adapters.agentdojo import labels as L
from containmentbench.adapters.agentdojo import tasks as T
from containmentbench.adapters.agentdojo.clock import frozen_clock
from containmentbench.adapters.agentdojo.gateway import make_runtime
from containmentbench.adapters.agentdojo.pipelines import (
    ground_truth_follower,
    served_backend,
    served_pipeline,
)
from containmentbench.adapters.agentdojo.tools import BENCHMARK_VERSION
from containmentbench.canonical import canonical_json, sha256_json, short_id
from containmentbench.defense.api import HookError
from containmentbench.defense.loading import Loaded
from containmentbench.trace.io import to_table
from containmentbench.trace.schema import EVENTS

PARSER_VERSION = "agentdojo-native-tool-calls"


@dataclass(frozen=True)
class RunSettings:
    study: str
    suite: str
    policy: Loaded                          # the study's defense (one, or a stack a+b+c)
    seed: int
    pipeline: str = "ground_truth"          # ground_truth | backend (the configured backend)
    model: str = "agentdojo-ground_truth"
    backend: Mapping[str, Any] = field(default_factory=lambda: {"name": "ground_truth"})
    attack: str = "direct"
    native: bool = True
    # the study's decoding block (config/decoding.py) for a served model; None for the
    # ground truth, which decodes nothing
    decoding: Mapping[str, Any] | None = None
    # a served model's BackendConfig (models.base): vllm or openai; loaded once per process
    backend_config: Any = None

    def make_pipeline(self, spec: T.TaskSpec, guidance: str | None = None) -> Any:
        """The task's pipeline; ``guidance``: what the defense's ``plan_task`` adds to the
        system message besides its static prompt guidance (the adapter run only)."""
        if self.pipeline == "ground_truth":
            it = T.injection_task(spec.suite, spec.injection_id) if spec.injection_id else None
            return ground_truth_follower(T.user_task(spec.suite, spec.user_id), it,
                                         spec.injections)
        text = "\n\n".join(g for g in (self.policy.prompt_guidance, guidance) if g) or None
        return served_pipeline(served_backend(self.backend_config), self.model,
                               spec.scenario_id, self.seed, self.decoding, text)

    def ask(self) -> Any:
        """``generate([request])[0]`` of the served model (a defense's own calls), or None
        on the ground-truth pipeline, which serves no model."""
        if self.pipeline == "ground_truth" or self.backend_config is None:
            return None
        backend = served_backend(self.backend_config)
        return lambda req: backend.generate([req])[0]


@dataclass
class Outcome:
    """One adapter rollout: its trace recorder, labels and rollout facts."""

    spec: T.TaskSpec
    rollout_id: str
    rec: Any
    status: str
    error: str | None
    utility: bool | None
    security: bool | None
    native: tuple[bool | None, bool | None]
    final_answer: str | None
    diff: dict[str, Any]
    wall_s: float
    native_s: float
    proposals: int
    native_calls: int
    defense_tokens: tuple[int, int, int] = (0, 0, 0)  # model calls, prompt, completion
    hook_s: float = 0.0
    layers: str = "{}"                                  # per-layer cost (timings)


def check_task(suite: Any, task: Any, output: Any, pre: Any, post: Any,
               calls: Sequence[Any]) -> bool:
    """AgentDojo's own utility/security dispatch (pinned agentdojo==0.1.35)."""
    return bool(suite._check_task_result(task, output or [], pre, post, calls))


def run_native(cfg: RunSettings, spec: T.TaskSpec) -> tuple[bool | None, bool | None]:
    """AgentDojo alone: ``run_task_with_pipeline`` with its own ``FunctionsRuntime``."""
    s = T.suite(spec.suite)
    ut = T.user_task(spec.suite, spec.user_id)
    it = T.injection_task(spec.suite, spec.injection_id) if spec.injection_id else None
    with frozen_clock():
        env = T.load_environment(spec.suite, spec.injections)
        utility, security = s.run_task_with_pipeline(cfg.make_pipeline(spec), ut, it,
                                                     spec.injections, environment=env)
    return bool(utility), (bool(security) if it is not None else None)


def rollout_id(cfg: RunSettings, spec: T.TaskSpec) -> str:
    return "ad-" + short_id(cfg.study, spec.scenario_id, cfg.model, cfg.policy.name, cfg.seed,
                            n=20)


def run_adapter(cfg: RunSettings, spec: T.TaskSpec) -> Outcome:
    from agentdojo.agent_pipeline.errors import AbortAgentError
    from agentdojo.types import get_text_content_as_str

    s = T.suite(spec.suite)
    ut = T.user_task(spec.suite, spec.user_id)
    it = T.injection_task(spec.suite, spec.injection_id) if spec.injection_id else None
    rid = rollout_id(cfg, spec)
    t_native = time.perf_counter()
    status, error, utility, security, answer = "ok", None, None, None, None
    native: tuple[bool | None, bool | None] = (None, None)
    if cfg.native:
        try:
            native = run_native(cfg, spec)
        except Exception as exc:  # a provider error in the native run: an error row
            if cfg.pipeline == "ground_truth":
                raise
            status, error = "error", f"native: {type(exc).__name__}: {exc}"[:2000]
    t0 = time.perf_counter()
    with frozen_clock():
        env = ut.init_environment(T.load_environment(spec.suite, spec.injections))
        pre = env.model_copy(deep=True)
        rt = make_runtime(s.tools, rid, cfg.policy, spec.ledger, spec.injections, ut.PROMPT,
                          spec.scenario_id, cfg.ask())
        messages: Sequence[Any] = []
        try:
            if status == "error":
                raise RuntimeError(error)
            task, guidance = rt.plan_task(ut.PROMPT)
            _, _, env, messages, _ = cfg.make_pipeline(spec, guidance).query(task, rt, env)
        except AbortAgentError as exc:
            env, messages = exc.task_environment, exc.messages
        except HookError as exc:  # a defense's own failure: an error row, never an outcome
            rt.rec.add("defense_error", text=exc.detail, outcome="failure")
            status, error = "error", f"defense error: {exc.detail}"[:2000]
        except Exception as exc:  # provider or pipeline failure: an error, never an outcome
            if cfg.pipeline == "ground_truth":
                raise  # the ground truth cannot fail: a harness bug, not a measurement
            if status == "ok":
                status, error = "error", f"{type(exc).__name__}: {exc}"[:2000]
        if status == "ok":
            last = messages[-1] if messages else None
            output = last["content"] if last is not None and last["role"] == "assistant" \
                else None
            answer = get_text_content_as_str(output) if output else ""
            try:
                given = rt.final_answer(answer)
            except HookError as exc:
                rt.rec.add("defense_error", text=exc.detail, outcome="failure")
                status, error, given = "error", f"defense error: {exc.detail}"[:2000], answer
            if given != answer:  # a defense rewrote or withheld the answer the user gets
                from agentdojo.types import text_content_block_from_string

                answer, output = given, [text_content_block_from_string(given)]
        if status == "ok":
            utility = check_task(s, ut, output, pre, env, rt.executed)
            if it is not None:
                security = check_task(s, it, output, pre, env, rt.executed)
        diff = rt.env_diff()
    native_calls = sum(1 for m in messages if m["role"] == "assistant"
                       for c in (m.get("tool_calls") or []) if c.function in rt.functions)
    return Outcome(spec, rid, rt.rec, status, error, utility, security, native, answer, diff,
                   time.perf_counter() - t0, t0 - t_native, rt.calls, native_calls,
                   tuple(rt.defense_tokens), rt.host.hook_seconds,
                   canonical_json(rt.host.cost_record()))


def label_row(cfg: RunSettings, o: Outcome) -> dict[str, Any]:
    ev = o.rec.events
    gap = L.linkage(ev, o.native_calls)
    err = o.status == "error"
    trace_violation = None
    if not err and o.spec.injection_id is not None:
        keys = set(o.spec.attack_keys)
        trace_violation = any(e["kind"] == "commit" and _key(e) in keys for e in ev)
    applicable = not err and cfg.native and not L.altered(ev)
    parity = None
    if applicable:
        parity = (o.utility, o.security) == o.native
    return {"rollout_id": o.rollout_id, "suite": o.spec.suite, "user_task": o.spec.user_id,
            "injection_task": o.spec.injection_id, "stage": o.spec.stage,
            "defense": cfg.policy.name, "seed": cfg.seed, "status": o.status,
            "injectable": bool(T.injection_candidates(o.spec.suite, o.spec.user_id)),
            "injection_gt_calls": o.spec.injection_gt_calls,
            "native_utility": None if err else o.native[0],
            "native_security": None if err else o.native[1],
            "adapter_utility": o.utility, "adapter_security": o.security,
            "trace_violation": trace_violation, "parity_applicable": applicable,
            "parity": parity,
            "projection_parity": None if trace_violation is None
            else trace_violation == o.security,
            "linkage_complete": gap is None, "linkage_error": gap}


def _key(e: Mapping[str, Any]) -> tuple:
    from containmentbench.adapters.agentdojo.tools import authority_key

    return authority_key(e["tool"], json.loads(e["args"]))


def _rollout_row(cfg: RunSettings, o: Outcome) -> dict[str, Any]:
    ev = o.rec.events
    spec = o.spec
    count = lambda kind: sum(1 for e in ev if e["kind"] == kind)  # noqa: E731
    return {
        "rollout_id": o.rollout_id, "study": cfg.study, "suite": f"agentdojo:{spec.suite}",
        "scenario_id": spec.scenario_id,
        "scenario_hash": sha256_json({"benchmark": BENCHMARK_VERSION, "suite": spec.suite,
                                      "user_task": spec.user_id,
                                      "injection_task": spec.injection_id,
                                      "injections": spec.injections, "attack": cfg.attack}),
        "cluster_id": f"agentdojo:{spec.suite}/{spec.user_id}", "family": spec.suite,
        "stage": spec.stage, "domain": spec.suite, "topology": "single",
        "memory_mode": "session", "carrier": "tool_result" if spec.injection_id else None,
        "attack_goal": spec.injection_id, "model": cfg.model,
        "backend": cfg.backend["name"] if cfg.pipeline != "ground_truth" else "ground_truth",
        "agent_profile": None, "defense": cfg.policy.name,
        "method_version": cfg.policy.method_version, "policy_hash": cfg.policy.policy_hash,
        "parser_version": PARSER_VERSION, "seed": cfg.seed,
        "seed_record": canonical_json({"trace": cfg.seed, "attack": cfg.attack,
                                       "pipeline": cfg.pipeline}),
        "status": o.status, "error": o.error, "n_events": len(ev),
        "n_model_calls": count("model_call"), "n_proposals": count("proposal"),
        "n_commits": count("commit"),
        "n_blocked": sum(1 for e in ev if e["kind"] == "decision" and e["decision"] == "block"),
        "n_confirm": count("confirm_request"), "n_invalid_tool": 0, "n_parse_error": 0,
        "provider_seed_supported": bool(cfg.backend_config is not None and getattr(
            served_backend(cfg.backend_config), "seed_supported", False)),
        "n_truncated": sum(1 for e in ev if e["kind"] == "model_call"
                           and e.get("finish_reason") == "length"),
        "n_repeated_calls": _repeats(ev), "n_prefilled": 0,
        "decoding": canonical_json(dict(cfg.decoding) if cfg.decoding is not None else None),
        "tool_mode": "native",
        "tools_offered": "all",  # the AgentDojo suite's own tools
        "completion_digest": hashlib.sha256(b"".join(
            canonical_json([e.get("agent_instance"), e.get("text"), e.get("finish_reason")])
            .encode() for e in ev if e["kind"] == "model_call")).hexdigest(),
        "prompt_tokens": sum(e.get("call_prompt_tokens") or 0 for e in ev
                             if e["kind"] == "model_call"),
        "completion_tokens": sum(e.get("call_completion_tokens") or 0 for e in ev
                                 if e["kind"] == "model_call"),
        "env_diff": canonical_json(o.diff),
        "final_answer": o.final_answer, "defense_code": cfg.policy.code,
        "defense_model_calls": o.defense_tokens[0],
        "defense_prompt_tokens": o.defense_tokens[1],
        "defense_completion_tokens": o.defense_tokens[2],
    }


def _repeats(ev: Sequence[Mapping[str, Any]]) -> int:
    """Identical calls (same agent instance, tool and arguments) after the first, as the
    runtime counts them (``rollouts.n_repeated_calls``)."""
    seen: set[tuple[Any, ...]] = set()
    n = 0
    for e in ev:
        if e["kind"] == "proposal":
            key = (e.get("agent_instance"), e["tool"], e.get("args"))
            n += key in seen
            seen.add(key)
    return n


def shard_tables(cfg: RunSettings, outcomes: Sequence[Outcome]) -> dict[str, pa.Table]:
    names = EVENTS.names
    ev_cols: dict[str, list[Any]] = {n: [] for n in names}
    ed_cols: dict[str, list[Any]] = {"rollout_id": [], "src": [], "dst": [], "kind": [],
                                     "propagates_taint": []}
    rows, lab = [], []
    for o in outcomes:
        rows.append(_rollout_row(cfg, o))
        lab.append(label_row(cfg, o))
        for k, v in o.rec.columns(names).items():
            ev_cols[k].extend(v)
        for k, v in o.rec.edge_columns().items():
            ed_cols[k].extend(v)
    from containmentbench.trace.schema import ROLLOUTS

    # columns this adapter does not know (added to the contract later) stay null
    cols = lambda rs, schema: {f.name: [r.get(f.name) for r in rs] for f in schema}  # noqa: E731
    host = socket.gethostname()
    return {"rollouts": to_table("rollouts", cols(rows, ROLLOUTS)),
            "events": to_table("events", ev_cols), "edges": to_table("edges", ed_cols),
            "adapter_labels": to_table("adapter_labels", cols(lab, L.LABELS)),
            "timings": to_table("timings", {
                "rollout_id": [o.rollout_id for o in outcomes],
                "wall_s": [o.wall_s for o in outcomes],
                "model_s": [0.0 for _ in outcomes], "host": [host] * len(outcomes),
                # one adapter process per shard; no model engine is loaded
                "job": [f"{cfg.policy.name}/seed={cfg.seed}/{cfg.suite}"] * len(outcomes),
                "job_load_s": [0.0] * len(outcomes),
                # the ground-truth pipeline makes no model call; a served pipeline's call
                # latencies are not recorded by the adapter (null, not zero)
                "call_latency_s": [[] if cfg.pipeline == "ground_truth" else None
                                   for _ in outcomes],
                "defense_hook_s": [o.hook_s for o in outcomes],
                "defense_layers": [o.layers for o in outcomes]})}


def specs_for(suite: str, user_ids: Sequence[str], injection_ids: Sequence[str] | None,
              attack: str, stages: Sequence[str] = ("clean", "security")) -> list[T.TaskSpec]:
    """Clean specs for the user tasks, then every (user, injection) pair of an injectable
    user task (an attacked run needs a placed injection)."""
    out = []
    if "clean" in stages:
        out += [T.task_spec(suite, u, None, attack) for u in user_ids]
    if "security" in stages:
        inj = T.sort_ids(T.suite(suite).injection_tasks) if injection_ids is None \
            else list(injection_ids)
        out += [T.task_spec(suite, u, i, attack) for u in user_ids
                if T.injection_candidates(suite, u) for i in inj]
    return out


def run_specs(cfg: RunSettings, specs: Sequence[T.TaskSpec],
              progress: Callable[[int, int], None] | None = None) -> list[Outcome]:
    out = []
    for k, spec in enumerate(specs):
        out.append(run_adapter(cfg, spec))
        if progress is not None:
            progress(k + 1, len(specs))
    return out
