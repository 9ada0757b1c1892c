"""The runtime's side of the defense API: calls a defense's (or a stack's) hooks in a
defined order, checks each result, times each layer and records which layer decided.

A stack ``a+b+c`` is its layers in that order (pluggy calls hook implementations in a
defined order and records which one answered; here the order is the one the user wrote):

* ``plan_task``: every layer; guidance is appended in order, tool sets are intersected, a
  rewritten task is what the next layer sees.
* ``inspect_output``: every layer in order on the text the previous one left; a
  ``withhold`` ends the chain.
* ``authorize``: every layer in order until one blocks. The strongest verdict decides
  (block > confirm > rewrite > allow), and among layers with that verdict the first one; a
  rewrite changes the call the later layers see. With one layer the decision is that
  layer's own, unchanged.
* ``confirm``: every layer that asked for confirmation, in order; the first denial denies.
* ``after_commit``: every layer until one asks for a rollback.
* ``check_answer``: like ``inspect_output``.

A hook that raises or returns a malformed result is a :class:`~containmentbench.defense.
api.HookError` naming the defense, the hook and the scenario: the rollout ends as an error
row, never as an outcome (never a block).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from containmentbench.defense.api import (
    ALLOW,
    BLOCK,
    CONFIRM,
    HOOKS,
    PASS,
    REWRITE,
    ROLLBACK,
    WITHHOLD,
    AnswerVerdict,
    CommitVerdict,
    Confirmation,
    Decision,
    Defense,
    HookError,
    OutputVerdict,
    TaskPlan,
    implemented_hooks,
    malformed,
)
from containmentbench.defense.context import (
    Answer,
    Commit,
    DefenseContext,
    ModelService,
    RolloutState,
    TaskView,
    ToolCall,
    ToolOutput,
)
from containmentbench.defense.watch import enter_hook, leave_hook

_RANK = {ALLOW: 0, REWRITE: 1, CONFIRM: 2, BLOCK: 3}

#: the decision when no layer implements ``authorize`` (paper 000 §5.4: only high-risk
#: proposals need an authorization rule; low-risk reads are always allowed)
NO_HOOK_HIGH = Decision(ALLOW, "allow_no_authorize_hook")
NO_HOOK_LOW = Decision(ALLOW, "allow_low_risk")
UNCONFIRMED = Confirmation(False, "confirmation_not_committed")

#: (layer, messages, max_tokens) -> the model's text; the runtime records and counts it
ModelCaller = Callable[[str, Sequence[Mapping[str, str]], int], str]


@dataclass
class LayerCost:
    """One layer's cost in one rollout (timings are wall clock: never hashed)."""

    hook_s: float = 0.0
    hook_calls: int = 0
    model_calls: int = 0
    per_hook: dict[str, list[float]] = field(default_factory=dict)  # seconds of each call


@dataclass(frozen=True, slots=True)
class Gate:
    """The authorization of one proposal by the whole stack."""

    decision: Decision                 # what the trace records (the deciding layer's)
    layer: str                         # the deciding layer
    confirmers: tuple[int, ...]        # layers that asked for confirmation (indexes)
    args: Mapping[str, Any]            # the arguments the call executes with


@dataclass(frozen=True, slots=True)
class Step:
    """One layer's non-trivial result on an output, answer, task or commit."""

    layer: str
    result: Any


class _LayerModel:
    """The model service of one layer: every call is counted against that layer."""

    __slots__ = ("_call", "_cost", "_layer")

    def __init__(self, layer: str, call: ModelCaller, cost: LayerCost) -> None:
        self._layer, self._call, self._cost = layer, call, cost

    def complete(self, messages: Sequence[Mapping[str, str]], max_tokens: int = 256) -> str:
        self._cost.model_calls += 1
        return self._call(self._layer, messages, max_tokens)


@functools.lru_cache(maxsize=256)
def _hook_map(classes: tuple[type, ...]) -> dict[str, list[int]]:
    """For each hook, the layers (indexes) whose class implements it (once per stack)."""
    return {h: [i for i, c in enumerate(classes) if h in implemented_hooks(c)] for h in HOOKS}


@dataclass
class DefenseHost:
    layers: tuple[Defense, ...]
    state: RolloutState
    where: str                                   # the scenario (for error messages)
    model: ModelCaller | None = None
    contexts: tuple[DefenseContext, ...] = field(init=False)
    costs: dict[str, LayerCost] = field(init=False)
    _hooks: dict[str, list[int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.costs = {d.label: LayerCost() for d in self.layers}
        self._hooks = _hook_map(tuple(type(d) for d in self.layers))
        ctxs = []
        for d in self.layers:
            svc: ModelService | None = None
            if self.model is not None and "model" in d.assumes:
                svc = _LayerModel(d.label, self.model, self.costs[d.label])
            ctxs.append(context_for(d, self.state, svc))
        self.contexts = tuple(ctxs)

    # ------------------------------------------------------------------ facts

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.label for d in self.layers)

    def has(self, hook: str) -> bool:
        return bool(self._hooks[hook])

    @property
    def guidance(self) -> str | None:
        """The static prompt guidance of every layer, in order (None: none has any)."""
        parts = [d.prompt_guidance for d in self.layers if d.prompt_guidance]
        return "\n\n".join(parts) if parts else None

    # ------------------------------------------------------------------ calling one hook

    def _call(self, i: int, hook: str, *args: Any, tools: frozenset[str] = frozenset()
              ) -> Any:
        d = self.layers[i]
        cost = self.costs[d.label]
        t0 = time.perf_counter()
        try:
            mark = enter_hook(d.label, hook, self.where)
            try:
                out = getattr(d, hook)(*args, self.contexts[i])
            finally:
                leave_hook(mark)
        except HookError:
            raise
        except Exception as exc:  # a defense's own bug: an error row, never an outcome
            text = " ".join(str(exc).split())[:300]
            raise HookError(f"defense '{d.label}' hook '{hook}' on scenario '{self.where}' "
                            f"raised {type(exc).__name__}: {text}") from exc
        finally:
            dt = time.perf_counter() - t0
            cost.hook_s += dt
            cost.hook_calls += 1
            cost.per_hook.setdefault(hook, []).append(dt)
        if out is not None:
            why = malformed(hook, out, tools)
            if why:
                raise HookError(f"defense '{d.label}' hook '{hook}' on scenario "
                                f"'{self.where}' {why}")
        return out

    def _with(self, hook: str) -> list[int]:
        return self._hooks[hook]

    # ------------------------------------------------------------------ the hooks

    def plan_task(self, view: TaskView) -> tuple[TaskView, list[Step]]:
        """Every layer's plan in order; returns the view the agent starts with."""
        steps = []
        for i in self._with("plan_task"):
            plan: TaskPlan | None = self._call(i, "plan_task", view,
                                               tools=frozenset(view.tools))
            if plan is None or not plan.changes:
                continue
            steps.append(Step(self.layers[i].label, plan))
            if plan.tools is not None:
                view = replace(view, tools=tuple(t for t in view.tools if t in plan.tools))
            if plan.task is not None:
                view = replace(view, task=plan.task)
        return view, steps

    def inspect_output(self, out: ToolOutput) -> list[Step]:
        steps = []
        for i in self._with("inspect_output"):
            v: OutputVerdict | None = self._call(i, "inspect_output", out)
            if v is None or (v.action == PASS and v.score is None):
                continue
            steps.append(Step(self.layers[i].label, v))
            if v.action == WITHHOLD:
                break
            if v.text is not None and v.action != PASS:
                out = replace(out, text=v.text)
        return steps

    def authorize(self, call: ToolCall) -> Gate:
        idx = self._with("authorize")
        if not idx:
            d = NO_HOOK_HIGH if call.high_risk else NO_HOOK_LOW
            return Gate(d, self.layers[0].label, (), call.args)
        decided: list[tuple[int, Decision]] = []
        for i in idx:
            d = self._call(i, "authorize", call)
            if d is None:
                d = NO_HOOK_HIGH if call.high_risk else NO_HOOK_LOW
            decided.append((i, d))
            if d.verdict == BLOCK:
                break
            if d.verdict == REWRITE:
                call = replace(call, args=MappingProxyType(dict(d.args or {})))
        if len(decided) == 1:
            i, d = decided[0]
            return Gate(d, self.layers[i].label, (i,) if d.verdict == CONFIRM else (),
                        call.args)
        top = max(_RANK[d.verdict] for _, d in decided)
        i, d = next((i, d) for i, d in decided if _RANK[d.verdict] == top)
        ledger = d.ledger_match if d.ledger_match is not None else next(
            (x.ledger_match for _, x in decided if x.ledger_match is not None), None)
        ev = {**d.evidence, "layers": [{"layer": self.layers[j].label, "verdict": x.verdict,
                                        "rule_id": x.rule_id} for j, x in decided]}
        confirmers = tuple(j for j, x in decided if x.verdict == CONFIRM) \
            if top == _RANK[CONFIRM] else ()
        return Gate(Decision(d.verdict, d.rule_id, ev, ledger, d.rollback, d.args),
                    self.layers[i].label, confirmers, call.args)

    def confirm(self, call: ToolCall, gate: Gate) -> tuple[Confirmation, str]:
        last = UNCONFIRMED, gate.layer
        for i in gate.confirmers:
            label = self.layers[i].label
            c = self._call(i, "confirm", call) if "confirm" in self.layers[i].hooks else None
            c = c if c is not None else UNCONFIRMED  # no human in the loop: not committed
            if not c.approved:
                return c, label
            last = c, label
        return last

    def after_commit(self, commit: Commit) -> Step | None:
        for i in self._with("after_commit"):
            v: CommitVerdict | None = self._call(i, "after_commit", commit)
            if v is not None and v.action == ROLLBACK:
                return Step(self.layers[i].label, v)
        return None

    def check_answer(self, answer: Answer) -> list[Step]:
        steps = []
        for i in self._with("check_answer"):
            v: AnswerVerdict | None = self._call(i, "check_answer", answer)
            if v is None or v.action == PASS:
                continue
            steps.append(Step(self.layers[i].label, v))
            if v.action == WITHHOLD:
                break
            answer = replace(answer, text=v.text or "")
        return steps

    # ------------------------------------------------------------------ costs

    def cost_record(self) -> dict[str, dict[str, float]]:
        return {k: {"hook_s": c.hook_s, "hook_calls": c.hook_calls,
                    "model_calls": c.model_calls} for k, c in self.costs.items()}

    @property
    def hook_seconds(self) -> float:
        return sum(c.hook_s for c in self.costs.values())


__all__ = ["ALLOW", "BLOCK", "CONFIRM", "REWRITE", "DefenseHost", "DefenseModelCalls", "Gate",
           "LayerCost", "ModelCaller", "Step", "context_for"]


class DefenseModelCalls:
    """A rollout's defense model calls (a judge, a tool filter): each a request through the
    rollout's backend with its own stable id and seed, recorded (``record``: the runtime's
    ``defense_model_call`` node) and counted as the defense's cost. A provider error is an
    error, never a verdict: :class:`HookError`. ``ask`` is ``generate([request])[0]`` of the
    backend, or None where there is no model (then ``missing`` says why)."""

    def __init__(self, ask: Callable[[Any], Any] | None, record: Callable[..., Any],
                 request_prefix: str, seed_key: tuple[Any, ...], temperature: float,
                 missing: str = "this run has none") -> None:
        self.ask, self.record = ask, record
        self.prefix, self.seed_key, self.temperature = request_prefix, seed_key, temperature
        self.missing = missing
        self.tokens = [0, 0, 0]  # model calls, prompt and completion tokens

    def __call__(self, layer: str, messages: Sequence[Mapping[str, str]],
                 max_tokens: int) -> str:
        from containmentbench.canonical import stable_int
        from containmentbench.models.base import GenerationRequest, call_record

        if self.ask is None:
            raise HookError(f"defense '{layer}' asked for a model, but {self.missing}")
        n = self.tokens[0] = self.tokens[0] + 1
        req = GenerationRequest(request_id=f"{self.prefix}/{layer}/{n}",
                                messages=[dict(m) for m in messages], tools=[],
                                seed=stable_int(*self.seed_key, layer, n) & 0x7FFFFFFF,
                                max_tokens=max_tokens, temperature=self.temperature,
                                sim=("defense", layer), tool_mode="prompt")
        c = self.ask(req)
        self.tokens[1] += c.prompt_tokens
        self.tokens[2] += c.completion_tokens
        self.record(text=c.text, layer=layer, outcome="failure" if c.error else "success",
                    **call_record(c))
        if c.error is not None:
            raise HookError(f"defense '{layer}' model call failed: {c.error}")
        return c.text


def context_for(defense: Defense, state: RolloutState,
                model: ModelService | None = None) -> DefenseContext:
    """One defense's context over ``state`` (what the host builds for each layer; for unit
    tests of a defense and for ``containmentbench defenses check``)."""
    return DefenseContext(state, defense.label, frozenset(defense.assumes),
                          MappingProxyType(dict(defense.params)), model)
