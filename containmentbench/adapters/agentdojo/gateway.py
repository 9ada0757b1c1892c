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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from containmentbench.adapters.agentdojo import defenses
from containmentbench.adapters.agentdojo.tasks import carried
from containmentbench.adapters.agentdojo.tools import is_sink, key_json, verb
from containmentbench.canonical import canonical_json
from containmentbench.gateway.gateway import Gateway
from containmentbench.policies.base import ALLOW, CONFIRM, Policy
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


def make_runtime(tools: Sequence[Any], rollout_id: str, policy: Policy,
                 ledger: tuple, injections: Mapping[str, str], prompt: str) -> Any:
    """A fresh :class:`GatewayRuntime` for one rollout."""
    return _runtime_class()(tools, rollout_id, policy, ledger, injections, prompt)


@lru_cache(maxsize=1)
def _runtime_class() -> type:
    """The class (a subclass of AgentDojo's ``FunctionsRuntime``), built once and lazily so
    this module imports without the optional package."""
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime

    class GatewayRuntime(FunctionsRuntime):
        def __init__(self, tools: Sequence[Any], rollout_id: str, policy: Policy,
                     ledger: tuple, injections: Mapping[str, str], prompt: str) -> None:
            super().__init__(tools)
            self.rollout_id = rollout_id
            self.injections = injections
            self.rec = Recorder(rollout_id)
            self.policy = policy
            self.ledger = ledger
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
            self.committed_keys: list[Any] = []  # rollback_v2: one live commit per entry

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

        def final_answer(self, text: str) -> None:
            """The last assistant message (already recorded as a model step, or recorded
            now)."""
            if self.step is None or self.rec.events[-1]["kind"] != "model_call":
                self.model_step(text)
            self.rec.add("final_answer", agent=self.agent, text=text,
                         flows=[(self.step, "answer")])

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
            call = defenses.Call(function, args, high, tainted, self.ledger,
                                 tuple(self.committed_keys))
            if high:
                self.proposed_sinks += 1
            common = {"call_id": call_id, "tool": function, "action_semantic": verb(function),
                      "args": canonical_json(args)}
            prop = self.rec.add("proposal", agent=self.agent, flows=[(step, "propose")],
                                high_risk=high, ledger_match=call.matched if high else None,
                                target=canonical_json(key_json(call.key)) if high else None,
                                tainted_fields=sorted(args) if tainted else [], **common)
            dec = defenses.authorize(self.policy, call)
            dnode = self.rec.add("decision", agent=self.agent, links=[(prop, "authorize")],
                                 decision=dec.verdict, rule_id=dec.rule_id,
                                 evidence=canonical_json(_jsonable(dict(dec.evidence))),
                                 ledger_match=dec.ledger_match, high_risk=high, **common)
            allowed = dec.verdict == ALLOW
            if dec.verdict == CONFIRM:
                req = self.rec.add("confirm_request", agent=self.agent,
                                   links=[(dnode, "confirm")], **common)
                ok, rule = defenses.confirm(self.policy, call)
                dnode = self.rec.add("confirmation", agent=self.agent, links=[(req, "confirm")],
                                     decision="approved" if ok else "denied", rule_id=rule,
                                     **common)
                allowed = ok
            if not allowed:
                msg = f"PolicyBlocked: the call was not authorized ({dec.rule_id})"
                self._result(prop, dnode, "", msg, common)
                return "", msg
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
                self.committed_keys.append(call.key)
                parent = self.rec.add("commit", agent=self.agent, flows=[(prop, "commit")],
                                      links=[(dnode, "authorized")], high_risk=True,
                                      ledger_match=call.matched, commit_id=f"{call_id}:commit",
                                      text=canonical_json(diff), outcome="success", **common)
            if error is None:
                self.executed.append(FunctionCall(function=function, args=dict(kwargs)))
            self._result(prop, parent, result, error, common)
            return result, error

        def _dump(self, env: Any, function: str) -> dict[str, Any]:
            """The parts of the environment the tool receives (its ``Depends`` attributes:
            a tool can change nothing else), or all of it for a computed dependency."""
            deps = self.functions[function].dependencies.values()
            names = [d.env_dependency for d in deps]
            if not all(isinstance(n, str) for n in names):
                return env.model_dump(mode="json")
            return {n: _jsonable(getattr(env, n)) for n in sorted(set(names))}

        def _result(self, prop: int, parent: int, result: Any, error: str | None,
                    common: Mapping[str, Any]) -> None:
            # the returned value as canonical JSON (the agent sees AgentDojo's YAML rendering
            # of the same value; JSON keeps the trace cheap and byte-stable)
            text = error if error else canonical_json(_jsonable(result))
            found = carried(result, self.injections) if not error else []
            self.last_carried = found  # the pipeline's follower reads it instead of re-walking
            vecs = set(found)
            seen = [(s, "observe") for vec, s in self.sources if vec in vecs]
            node = self.rec.add("tool_result", agent=self.agent,
                                flows=[(prop, "result"), *seen],
                                links=[(parent, "after")] if parent != prop else (),
                                text=text, outcome="failure" if error else "success",
                                **common)
            self.observed.append(node)

    return GatewayRuntime
