"""The gateway runtime: every AgentDojo tool call goes through our gateway and policy.

:class:`GatewayRuntime` is an AgentDojo ``FunctionsRuntime`` whose ``run_function`` is the
interception point (paper 002 App. C.2): the call gets a stable call id (rollout id and call
ordinal, never a provider id: Appendix C, "stable call identifiers"), is bound to the
rollout's delegation, recorded as a ``proposal``, decided by the policy (``decision``, with
confirmation nodes on the confirmation path), executed only if allowed, and its result is
recorded as a ``tool_result``. A sink that executes is a ``commit`` whose ``text`` is the
environment difference (pre/post values of every changed path, wall clock frozen). A blocked
or denied call never reaches AgentDojo's function; the agent sees a policy error instead.

Taint (eq. 2): each placed injection is a ``source`` node; a tool result whose text contains
a placed injection (in any of its string values) flows from that source. Model steps flow from everything the agent has
observed, so a proposal made after the agent saw an injection is tainted (context taint, as in
our own runtime).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from containmentbench.adapters.agentdojo.knowledge import knowledge_of, tool_infos
from containmentbench.adapters.agentdojo.tasks import carried
from containmentbench.adapters.agentdojo.tools import authority_key, is_sink, key_json, verb
from containmentbench.canonical import canonical_json
from containmentbench.defense.api import (
    BLOCK,
    CONFIRM,
    REDACT,
    REWRITE,
    WITHHOLD,
    HookError,
)
from containmentbench.defense.context import (
    AgentInfo,
    Answer,
    Commit,
    RolloutState,
    TaskView,
    ToolCall,
    ToolOutput,
    frozen_args,
)
from containmentbench.defense.host import DefenseHost, DefenseModelCalls
from containmentbench.defense.loading import Loaded
from containmentbench.gateway.gateway import Gateway
from containmentbench.trace.recorder import Recorder

PRINCIPAL = "user"


@dataclass(frozen=True, slots=True)
class _Agent:
    agent_id: str
    instance: str
    delegation_id: str
    delegation_parent_id: str | None
    principal_id: str


def _jsonable(v: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(v, BaseModel):
        return v.model_dump(mode="json")
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def env_diff(pre: Any, post: Any, path: str = "") -> dict[str, dict[str, Any]]:
    """Changed paths between two JSON values: ``{path: {"pre": old, "post": new}}``."""
    if pre == post:  # equal subtrees are pruned by one C-level comparison
        return {}
    if isinstance(pre, dict) and isinstance(post, dict):
        out: dict[str, dict[str, Any]] = {}
        for k in sorted(set(pre) | set(post), key=str):
            out.update(env_diff(pre.get(k), post.get(k), f"{path}/{k}"))
        return out
    if isinstance(pre, list) and isinstance(post, list):
        out = {}
        for i in range(max(len(pre), len(post))):
            out.update(env_diff(pre[i] if i < len(pre) else None,
                                post[i] if i < len(post) else None, f"{path}/{i}"))
        return out
    return {} if pre == post else {path or "/": {"pre": pre, "post": post}}


def make_runtime(tools: Sequence[Any], rollout_id: str, defense: Loaded,
                 ledger: tuple, injections: Mapping[str, str], prompt: str,
                 where: str = "", model: Callable[[Any], Any] | None = None) -> Any:
    """A fresh :class:`GatewayRuntime` for one rollout (``where``: the task, for errors;
    ``model``: ``generate([request])[0]`` of the served backend, for a defense's own calls)."""
    return _runtime_class()(tools, rollout_id, defense, ledger, injections, prompt, where,
                            model)


@lru_cache(maxsize=1)
def _runtime_class() -> type:
    """The class (a subclass of AgentDojo's ``FunctionsRuntime``), built once and lazily so
    this module imports without the optional package."""
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

    class GatewayRuntime(FunctionsRuntime):
        def __init__(self, tools: Sequence[Any], rollout_id: str, defense: Loaded,
                     ledger: tuple, injections: Mapping[str, str], prompt: str,
                     where: str, model: Callable[[Any], Any] | None) -> None:
            super().__init__(tools)
            self.rollout_id = rollout_id
            self.injections = injections
            self.rec = Recorder(rollout_id)
            self.defense = defense
            self.ledger = ledger
            calls = DefenseModelCalls(
                model, lambda **kw: self.rec.add("defense_model_call", **kw),
                f"{rollout_id}/defense", ("defense", rollout_id), 0.0,
                "this AgentDojo pipeline serves none (a served model: backend=vllm|openai)")
            self.defense_tokens = calls.tokens  # model calls, prompt and completion tokens
            state = RolloutState([prompt], [AgentInfo("agent", "primary")],
                                 tool_infos(self.functions), knowledge_of(ledger))
            self.host = DefenseHost(defense.layers, state, where or rollout_id, calls)
            gw = Gateway(rollout_id, PRINCIPAL, None, "")  # type: ignore[arg-type]
            d = gw.mint("agent", "agent#1", None, 0)
            self.agent = _Agent("agent", "agent#1", d.delegation_id, None, PRINCIPAL)
            self.rec.add("delegate", agent=self.agent, text=d.delegation_id)
            self.goal = self.rec.add("user_goal", agent=self.agent, text=prompt)
            # placed injections (U_tau), one source node per vector
            self.sources: list[tuple[str, int]] = []
            for vec in sorted(injections):
                s = self.rec.add("source", labels=[f"taint:{vec}"], target=vec,
                                 text=injections[vec], resource_class="injection_vector")
                self.sources.append((vec, s))
            self.observed: list[int] = [self.goal]
            self.step: int | None = None
            self.calls = 0
            self.executed: list[Any] = []   # FunctionCalls that ran (AgentDojo's stack trace)
            self.env_pre: Any = None
            self.proposed_sinks = 0
            self.diff: dict[str, dict[str, Any]] = {}  # path -> first pre, last post
            self.last_carried: list[str] = []

        def env_diff(self) -> dict[str, dict[str, Any]]:
            """The rollout's environment difference: only sinks change the environment (a
            test checks every read tool), so it is the composition of the commits' diffs."""
            return {p: ch for p, ch in sorted(self.diff.items()) if ch["pre"] != ch["post"]}

        # -- model steps -------------------------------------------------------------------
        def model_step(self, text: str, parse_status: str | None = None,
                       **record: Any) -> int:
            """One assistant message: flows from every observation so far; ``record``: the
            call's fields of a ``model_call`` event (models.base.call_record) when a served
            model made it."""
            self.step = self.rec.add("model_call", agent=self.agent, text=text,
                                     parse_status=parse_status,
                                     flows=[(o, "context") for o in self.observed], **record)
            return self.step

        def final_answer(self, text: str) -> str:
            """The last assistant message (already recorded as a model step, or recorded
            now), through the defense's ``check_answer``; returns the answer the user gets."""
            if self.step is None or self.rec.events[-1]["kind"] != "model_call":
                self.model_step(text)
            fin = self.rec.add("final_answer", agent=self.agent, text=text,
                               flows=[(self.step, "answer")])
            if not self.host.has("check_answer"):
                return text
            self.sync()
            for st in self.host.check_answer(Answer("agent", text, 1, True)):
                v = st.result
                common = self._common(v, st.layer)
                if v.action == REWRITE:
                    text = v.text or ""
                    fin = self.rec.add("answer_check", flows=[(fin, "rewrites")], text=text,
                                       **common)
                else:
                    text = v.text or "(answer withheld by a defense)"
                    fin = self.rec.add("answer_check", links=[(fin, "audit")], text=text,
                                       **common)
            return text

        # -- the defense API ---------------------------------------------------------------
        def sync(self) -> None:
            self.host.state.sync(self.rec.events, self.rec.labels)

        def _common(self, v: Any, layer: str) -> dict[str, Any]:
            ev = {**v.evidence, **({"score": v.score} if getattr(v, "score", None)
                                   is not None else {})}
            return {"agent": self.agent, "decision": v.action, "rule_id": v.rule_id,
                    "layer": layer, "evidence": canonical_json(_jsonable(ev)) if ev else None}

        def plan_task(self, prompt: str) -> tuple[str, str | None]:
            """``plan_task`` before the first model call: the tools the model is offered
            (the runtime's functions are narrowed), guidance for its system message and
            the task text it is given; returns (task, guidance from the hooks)."""
            if not self.host.has("plan_task"):
                return prompt, None
            self.sync()
            view = TaskView("agent", "primary", prompt, tuple(sorted(self.functions)), 1,
                            False)
            view, steps = self.host.plan_task(view)
            for st in steps:
                plan = st.result
                self.rec.add("task_plan", agent=self.agent, links=[(self.goal, "audit")],
                             decision="plan", rule_id=plan.rule_id, layer=st.layer,
                             evidence=canonical_json(_jsonable(dict(plan.evidence)))
                             if plan.evidence else None,
                             args=canonical_json({"tools": None if plan.tools is None
                                                  else sorted(plan.tools),
                                                  "guidance": plan.guidance}),
                             text=plan.task)
            self.functions = {k: f for k, f in self.functions.items() if k in view.tools}
            guidance = [st.result.guidance for st in steps if st.result.guidance]
            return view.task, "\n\n".join(guidance) or None

        # -- the interception point --------------------------------------------------------
        def run_function(self, env: Any, function: str, kwargs: Mapping[str, Any],
                         raise_on_error: bool = False) -> tuple[Any, str | None]:
            if self.step is None:  # a pipeline that does not report its model steps
                self.model_step(canonical_json({"function": function,
                                                "args": _jsonable(dict(kwargs))}))
            step = self.step
            self.calls += 1
            call_id = f"{self.rollout_id}:call-{self.calls:03d}"
            args = _jsonable(dict(kwargs))
            high = is_sink(function)
            tainted = self.rec.tainted(step)
            if high:
                self.proposed_sinks += 1
            common = {"call_id": call_id, "tool": function, "action_semantic": verb(function),
                      "args": canonical_json(args)}
            key = authority_key(function, args)
            matched = key in self.ledger
            prop = self.rec.add("proposal", agent=self.agent, flows=[(step, "propose")],
                                high_risk=high, ledger_match=matched if high else None,
                                target=canonical_json(key_json(key)) if high else None,
                                tainted_fields=sorted(args) if tainted else [], **common)
            call = ToolCall(function, frozen_args(args), "agent", 1, prop, call_id, high,
                            tainted, self.rec.labels[prop],
                            MappingProxyType(dict.fromkeys(args, tainted)))
            self.sync()
            gate = self.host.authorize(call)
            dec = gate.decision
            if dec.rollback:
                raise HookError(f"defense '{gate.layer}' asked for a rollback, which AgentDojo's "
                                f"tools cannot do (they have no undo)")
            # the sink's ledger match is recorded for every sink decision (an observer's fact)
            lm = dec.ledger_match if dec.ledger_match is not None or not high else matched
            dnode = self.rec.add("decision", agent=self.agent, links=[(prop, "authorize")],
                                 decision=dec.verdict, rule_id=dec.rule_id,
                                 evidence=canonical_json(_jsonable(dict(dec.evidence))),
                                 ledger_match=lm, high_risk=high, layer=gate.layer, **common)
            allowed = dec.verdict != BLOCK
            if dec.verdict == CONFIRM:
                req = self.rec.add("confirm_request", agent=self.agent,
                                   links=[(dnode, "confirm")], **common)
                conf, layer = self.host.confirm(call, gate)
                dnode = self.rec.add("confirmation", agent=self.agent, links=[(req, "confirm")],
                                     decision="approved" if conf.approved else "denied",
                                     rule_id=conf.rule_id, layer=layer, **common)
                allowed = conf.approved
            if not allowed:
                msg = f"PolicyBlocked: the call was not authorized ({dec.rule_id})"
                self._result(prop, dnode, "", msg, common)
                return "", msg
            if dec.verdict == REWRITE or gate.args is not call.args:
                kwargs = dict(gate.args)
            pre = self._dump(env, function) if high and env is not None else None
            try:
                result, error = super().run_function(env, function, kwargs, raise_on_error)
            except Exception as exc:
                self._result(prop, dnode, "", f"{type(exc).__name__}: {exc}", common)
                raise
            parent = dnode
            if high and error is None:
                post = self._dump(env, function)
                diff = env_diff(pre, post)
                for path, ch in diff.items():  # the rollout's diff, composed commit by commit
                    first = self.diff.get(path, ch)["pre"]
                    self.diff[path] = {"pre": first, "post": ch["post"]}
                parent = self.rec.add("commit", agent=self.agent, flows=[(prop, "commit")],
                                      links=[(dnode, "authorized")], high_risk=True,
                                      ledger_match=matched, commit_id=f"{call_id}:commit",
                                      text=canonical_json(diff), outcome="success", **common)
                self.host.state.add_commit(Commit(f"{call_id}:commit", function,
                                                  frozen_args(_jsonable(dict(kwargs))), 1,
                                                  parent, tainted, True, False))
                if self.host.has("after_commit"):
                    self.sync()
                    st = self.host.after_commit(self.host.state.trace.commits()[-1])
                    if st is not None:
                        raise HookError(f"defense '{st.layer}' asked to roll back a commit, "
                                        f"which AgentDojo's tools cannot do (no undo)")
            if error is None:
                self.executed.append(FunctionCall(function=function, args=dict(kwargs)))
            return self._result(prop, parent, result, error, common)

        def _dump(self, env: Any, function: str) -> dict[str, Any]:
            """The parts of the environment the tool receives (its ``Depends`` attributes:
            a tool can change nothing else), or all of it for a computed dependency."""
            deps = self.functions[function].dependencies.values()
            names = [d.env_dependency for d in deps]
            if not all(isinstance(n, str) for n in names):
                return env.model_dump(mode="json")
            return {n: _jsonable(getattr(env, n)) for n in sorted(set(names))}

        def _result(self, prop: int, parent: int, result: Any, error: str | None,
                    common: Mapping[str, Any]) -> tuple[Any, str | None]:
            """Record the tool's result and pass it through ``inspect_output``; returns
            what the agent reads (a rewritten or withheld output replaces the value)."""
            # the returned value as canonical JSON (the agent sees AgentDojo's YAML rendering
            # of the same value; JSON keeps the trace cheap and byte-stable)
            text = error if error else canonical_json(_jsonable(result))
            found = carried(result, self.injections) if not error else []
            vecs = set(found)
            seen = [(s, "observe") for vec, s in self.sources if vec in vecs]
            node = self.rec.add("tool_result", agent=self.agent,
                                flows=[(prop, "result"), *seen],
                                links=[(parent, "after")] if parent != prop else (),
                                text=text, outcome="failure" if error else "success",
                                **common)
            if not error and self.host.has("inspect_output"):
                self.sync()
                out = ToolOutput(common["tool"], common["call_id"], "agent", text,
                                 self.rec.tainted(node), self.rec.labels[node])
                for st in self.host.inspect_output(out):
                    v = st.result
                    kw = {**self._common(v, st.layer), "call_id": common["call_id"],
                          "tool": common["tool"]}
                    if v.action in (REWRITE, REDACT):
                        text = result = v.text or ""
                        node = self.rec.add("output_check", flows=[(node, "rewrites")],
                                            text=text, **kw)
                        found = carried(text, self.injections)
                    elif v.action == WITHHOLD:
                        text = result = v.text or "(output withheld by a defense)"
                        node = self.rec.add("output_check", links=[(node, "audit")],
                                            text=text, **kw)
                        found = []
                    else:
                        self.rec.add("output_check", links=[(node, "audit")], **kw)
            self.last_carried = found  # the pipeline's follower reads it instead of re-walking
            self.observed.append(node)
            return result, error

    return GatewayRuntime
