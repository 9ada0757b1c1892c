"""One rollout as a resumable state machine: the runtime side of the episode loop.

The lockstep driver asks each episode for its pending model request (:meth:`Episode.request`)
and hands back the completion (:meth:`Episode.feed`). Feeding runs the rest of the step:
parse with diagnostics -> invalid tools stopped before any proposal -> gateway binding ->
proposal -> policy decision (-> confirmation) -> precommit -> commit -> observation, recording
every node and edge of the trace (paper 000 §3.5, §5.4, Appendix H).

Outputs as they are: a completion the provider cut at ``max_tokens`` (``finish_reason``
``length``) is ``truncated`` -- recorded, fed back, counted toward the agent's consecutive
errors, never parsed into a final answer or an action. Identical calls (same agent instance,
tool and arguments) are counted per rollout; ``max_identical_calls`` optionally stops an agent
at its Nth identical call (recorded as its failed final answer; rollout status
``repeat_limit``).

Prefilled first step (a scenario's ``prefill``, the exposed suites of ``scenarios/generator``):
before the entry agent's first model call of a session, the runtime takes the listed read
for it -- the same gateway binding, proposal (``origin: prefill``), policy decision and tool
result as any call -- and the result is attached to the user's request (one user turn: the
goal, then the observation), as in AgentDojo's injection-in-tool-output setting. The
untrusted carrier thus reaches the model in its first observation in every tool mode, and
there is no scripted assistant action for a small model to copy (a first design put the read
in the context as the agent's own call; Qwen2.5-Coder-0.5B then repeated it until stopped).
Prefilled proposals are not model actions: they are counted apart (``n_prefilled``) and no
``model_call`` precedes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from containmentbench.canonical import canonical_json, stable_int
from containmentbench.defense.api import REDACT, REWRITE, WITHHOLD, Defense, HookError
from containmentbench.defense.context import Answer, TaskView, ToolOutput
from containmentbench.defense.host import DefenseHost, DefenseModelCalls
from containmentbench.gateway import Gateway
from containmentbench.models.base import Completion, GenerationRequest, call_record
from containmentbench.parser import VALID_STATUSES, parse
from containmentbench.runtime import prompts
from containmentbench.runtime.effects import Effects
from containmentbench.runtime.knowledge import scenario_state
from containmentbench.runtime.provenance import value_tainted
from containmentbench.runtime.state import (
    AgentRun,
    RolloutSpec,
    RuntimeConfig,
    trusted_index,
)
from containmentbench.sandbox.tools import TOOLS, is_high_risk
from containmentbench.sandbox.world import World, diff
from containmentbench.scenarios.model import Scenario
from containmentbench.scenarios.toolsets import offered
from containmentbench.scenarios.topology import reachable
from containmentbench.trace.recorder import Recorder, is_tainted


class Episode:
    """A single rollout of one scenario under one defense, model and seed."""

    def __init__(self, scenario: Scenario, defense: Defense | Sequence[Defense],
                 spec: RolloutSpec, cfg: RuntimeConfig,
                 ask: Callable[[GenerationRequest], Completion] | None = None) -> None:
        self.s = scenario
        self.layers = (defense,) if isinstance(defense, Defense) else tuple(defense)
        self.spec = spec
        self.cfg = cfg
        self.rec = Recorder(spec.rollout_id)
        self.world = World.from_spec(scenario.initial_state)
        self.before = self.world.snapshot()
        self.gateway = Gateway(spec.rollout_id, scenario.initial_state["principal"]["user_id"],
                               self.world, scenario.authorization["org_domain"])
        self.trusted = trusted_index(scenario)
        self.source_seq: dict[str, int] = {}
        self.agent_specs = {a["id"]: a for a in scenario.agents}
        self.active: AgentRun | None = None
        self.session = 0
        self.instances = 0
        self.steps = 0
        self.status = "ok"
        self.error: str | None = None
        self.final_answer: str | None = None
        self.counts = {"proposals": 0, "commits": 0, "blocked": 0, "confirm": 0,
                       "invalid_tool": 0, "parse_error": 0, "model_calls": 0, "truncated": 0,
                       "repeated_calls": 0, "prefilled": 0}
        # the defense's hooks (defense/host.py) over a context that holds only what a
        # deployment could know (runtime/knowledge.py), never the scenario record
        self.defense_calls = DefenseModelCalls(
            ask, lambda **kw: self.rec.add("defense_model_call", **kw),
            f"{spec.rollout_id}/defense", ("defense", scenario.id, spec.model, spec.seed),
            cfg.temperature)
        self.defense_tokens = self.defense_calls.tokens  # model calls, prompt, completion
        self.host = DefenseHost(self.layers, scenario_state(scenario), scenario.id,
                                self.defense_calls)
        # the authorization and effect phases of tool calls (effects.py); their commits, undo
        # records and memory origins are the episode's under the same names
        self.effects = Effects(self.rec, self.world, self.host, scenario, self.counts,
                               self.source_seq)
        self.commits = self.effects.commits
        self.undo = self.effects.undo
        self.memory_origin = self.effects.memory_origin
        self.tokens = [0, 0]
        self.said = hashlib.sha256()   # completion_digest (trace/schema.py)
        self.latencies: list[float] = []  # per model call (timings table, never hashed)
        self.finished = False
        try:
            self._start()
        except HookError as exc:
            self._defense_failed(exc)

    # ------------------------------------------------------------------ lifecycle

    def _start(self) -> None:
        for u in self.s.untrusted:
            self.source_seq[u["source_id"]] = self.rec.add(
                "source", labels=(f"taint:{u['source_id']}",), text=u["text"],
                resource_id=u["source_id"], resource_class=u["carrier"])
        self._start_session(1)

    def _start_session(self, n: int) -> None:
        self.session = n
        self.rec.session = n
        links = []
        if n > 1:
            links = [(len(self.rec.events) - 1, "session")]
            self.rec.add("session_start", links=links, text=f"session {n}")
            links = [(len(self.rec.events) - 1, "session")]
        entry = self.s.agents[0]
        goal = self.s.goals[n - 1]
        self.host.state.start_session(n, goal)
        agent, task = self._spawn(entry, parent=None, links=links, task=goal)
        seq = self.rec.add("user_goal", agent=agent, text=goal, links=links)
        agent.messages.append({"role": "user", "content": task})
        agent.inbox.append((seq, task))
        self.active = agent
        for step in self.s.prefill:
            if step.session == n and step.agent == entry["id"]:
                self._prefill(agent, seq, step.tool, dict(step.args))

    def _prefill(self, a: AgentRun, goal_seq: int, tool: str, args: dict[str, Any]) -> None:
        """The scenario's prefilled read, taken for the agent before its first model call
        (module docstring): the result joins the user's request, so the carrier is in the
        model's first observation without a scripted action for it to copy."""
        self.counts["prefilled"] += 1
        a.attach_next = True
        self._execute(a, goal_seq, tool, args, origin="prefill")
        a.attach_next = False

    def _spawn(self, spec: Mapping[str, Any], parent: AgentRun | None,
               links: list[tuple[int, str]], task: str) -> tuple[AgentRun, str]:
        """Start an agent: its defense-planned tools, guidance and task (``plan_task``);
        returns it and the task text it is given."""
        self.instances += 1
        inst = f"{spec['id']}#{self.session}.{self.instances}"
        d = self.gateway.mint(spec["id"], inst, parent.delegation_id if parent else None,
                              self.rec.tick)
        tools = offered(spec["role"], self.s.domain, self.s.memory_mode, self.cfg.tools_offered)
        view = TaskView(spec["id"], spec["role"], task, tools, self.session, parent is not None)
        steps = []
        if self.host.has("plan_task"):
            self.effects.sync()
            view, steps = self.host.plan_task(view)
        guidance = [g for g in (self.host.guidance, *(st.result.guidance for st in steps)) if g]
        targets = reachable(self.s.agents, spec["role"])
        agent = AgentRun(spec["id"], spec["role"], inst, d.delegation_id, d.parent_id,
                         self.gateway.principal_id, view.tools,
                         [{"role": "system", "content": prompts.system_prompt(
                             spec["role"], view.tools, "\n\n".join(guidance) or None,
                             self.cfg.tool_mode, targets)}], [])
        agent.parent = parent
        agent.targets = targets
        dlg = self.rec.add("delegate", agent=agent, links=links, action_semantic="delegate",
                           resource_class="agent", resource_id=d.delegation_id,
                           tool="delegate" if parent else None, outcome="success")
        sp = self.rec.add("spawn", agent=agent, links=[(dlg, "delegation")],
                          action_semantic="spawn", resource_class="agent", resource_id=inst,
                          outcome="success")
        for st in steps:
            plan = st.result
            self.rec.add("task_plan", agent=agent, links=[(sp, "audit")], decision="plan",
                         rule_id=plan.rule_id, layer=st.layer,
                         evidence=canonical_json(dict(plan.evidence)) if plan.evidence
                         else None,
                         args=canonical_json({"tools": None if plan.tools is None
                                              else sorted(plan.tools),
                                              "guidance": plan.guidance}),
                         text=plan.task)
        return agent, view.task

    def _end_agent(self, agent: AgentRun, result: str, final_seq: int) -> None:
        agent.done = True
        parent = agent.parent
        if parent is not None and parent.waiting_call is not None:
            msg = self.rec.add("message", agent=agent, flows=[(final_seq, "returns")],
                               text=result, target=parent.agent_id,
                               call_id=parent.waiting_call, action_semantic="invoke",
                               resource_class="agent")
            call_id, parent.waiting_call = parent.waiting_call, None
            self.active = parent
            self._read_output(parent, "delegate", call_id, msg, result,
                              lambda text: prompts.worker_result(agent.agent_id, text))
            return
        if self.session < self.s.n_sessions:
            self._start_session(self.session + 1)
            return
        self.final_answer = result
        self._finish()

    def _finish(self) -> None:
        self.active = None
        self.finished = True

    # ------------------------------------------------------------------ driver API

    def request(self) -> GenerationRequest | None:
        a = self.active
        if a is None or self.finished:
            return None
        step = a.turns
        seed = stable_int("req", self.s.id, self.spec.model, self.spec.seed, a.instance,
                          step) & 0x7FFFFFFF
        return GenerationRequest(
            request_id=f"{self.spec.rollout_id}/{a.instance}/{step}",
            messages=a.messages, tools=list(prompts.tool_schemas(a.tools, a.targets)),
            seed=seed,
            max_tokens=self.cfg.max_tokens, temperature=self.cfg.temperature,
            sim=(self.s, a, self.spec), tool_mode=self.cfg.tool_mode)

    def feed(self, completion: Completion) -> None:
        try:
            self._feed(completion)
        except HookError as exc:
            self._defense_failed(exc)

    def _feed(self, completion: Completion) -> None:
        a = self.active
        assert a is not None
        self.steps += 1
        a.turns += 1
        self.counts["model_calls"] += 1
        self.tokens[0] += completion.prompt_tokens
        self.tokens[1] += completion.completion_tokens
        self.latencies.append(completion.latency_s)
        self.said.update(canonical_json([a.instance, completion.text,
                                         completion.finish_reason]).encode())
        record = call_record(completion)
        if completion.error is not None:
            self.rec.add("model_call", agent=a, flows=self._context_flows(a),
                         text=completion.text, outcome="failure", **record)
            self.status, self.error = "error", completion.error
            self._finish()
            return
        if completion.finish_reason == "length":
            # cut at max_tokens: neither a final answer nor an action, whatever the text
            # looks like; recorded as it is, the agent is told, and it counts as an error
            self.counts["truncated"] += 1
            call = self._model_call(a, completion.text, record, "truncated")
            ev = self.rec.add("truncated", agent=a, flows=[(call, "emits")],
                              parse_status="truncated", outcome="failure",
                              text=f"cut at max_tokens ({completion.completion_tokens} tokens)")
            self._reject(a, call, ev, prompts.truncated(self.cfg.max_tokens))
        else:
            result = parse(completion.text, a.tools, self.cfg.parser) if self.cfg.parser \
                else parse(completion.text, a.tools)
            call = self._model_call(a, completion.text, record, result.status,
                                    repaired=result.repaired, repairs=list(result.repairs))
            self._handle(a, call, result)
        self._after_step(a, call)

    def _defense_failed(self, exc: HookError) -> None:
        """A defense's hook raised or answered malformed: an error row, never an outcome
        (and never a block): the rollout stops here with status ``error``."""
        self.rec.add("defense_error", text=exc.detail, outcome="failure")
        self.status, self.error = "error", f"defense error: {exc.detail}"
        self._finish()

    def _model_call(self, a: AgentRun, text: str, record: dict[str, Any], status: str,
                    **fields: Any) -> int:
        """Record the agent's completion (raw text kept); it joins the agent's context."""
        call = self.rec.add("model_call", agent=a, flows=self._context_flows(a), text=text,
                            parse_status=status, args=canonical_json({"tools": list(a.tools)}),
                            **fields, **record)
        a.last_call = call
        a.inbox = []
        a.messages = [*a.messages, {"role": "assistant", "content": text}]
        return call

    def _after_step(self, a: AgentRun, call: int) -> None:
        if not self.finished and self.steps >= self.cfg.max_steps:
            self.status = "step_limit"
            self._finish()
        elif (not self.finished and self.active is a and not a.done
              and a.turns >= self.cfg.max_agent_turns):
            self._give_up(a, call, "turn limit reached")

    def _reject(self, a: AgentRun, call: int, ev: int, msg: str) -> None:
        """Feedback for a completion that is not an action (``ev``: its failure node): the
        agent observes ``msg``, and gives up after too many in a row."""
        res = self.rec.add("tool_result", agent=a, links=[(ev, "feedback")], text=msg,
                           outcome="failure")
        self._observe(a, res, msg)
        a.errors += 1
        if a.errors >= self.cfg.max_consecutive_errors:
            self._give_up(a, call, "too many malformed actions")

    def _context_flows(self, a: AgentRun) -> list[tuple[int, str]]:
        flows = [(seq, "observe") for seq, _ in a.inbox]
        if a.last_call is not None:
            flows.append((a.last_call, "context"))
        return flows

    def _observe(self, a: AgentRun, seq: int, text: str) -> None:
        a.inbox.append((seq, text))
        if a.attach_next:  # a prefilled read: its result is part of the user's request
            last = a.messages[-1]
            a.messages = [*a.messages[:-1], {**last, "content": f"{last['content']}\n\n{text}"}]
            a.attach_next = False
        else:
            a.messages = [*a.messages, {"role": "user", "content": text}]
        if is_tainted(self.rec.labels[seq]):
            a.tainted_text.add(text)

    def _give_up(self, a: AgentRun, call: int, why: str) -> None:
        fin = self.rec.add("final_answer", agent=a, flows=[(call, "emits")],
                           text=f"(no answer: {why})", outcome="failure")
        self._end_agent(a, f"(no answer: {why})", fin)

    # ------------------------------------------------------------------ one step

    def _handle(self, a: AgentRun, call: int, result: Any) -> None:
        status = result.status
        if status == "final_answer":
            a.errors = 0
            text = result.final_text or ""
            fin = self.rec.add("final_answer", agent=a, flows=[(call, "emits")], text=text,
                               parse_status=status)
            if self.host.has("check_answer"):
                fin, text = self._check_answer(a, fin, text)
            self._end_agent(a, text, fin)
            return
        if status not in VALID_STATUSES:
            if status == "invalid_tool":
                self.counts["invalid_tool"] += 1
                name = result.calls[0].name if result.calls else "?"
                ev = self.rec.add("invalid_tool", agent=a, flows=[(call, "emits")], tool=name,
                                  args=canonical_json(result.calls[0].arguments)
                                  if result.calls else None, parse_status=status,
                                  outcome="failure")
                msg = prompts.invalid_tool(name)
            else:
                self.counts["parse_error"] += 1
                ev = self.rec.add("parse_error", agent=a, flows=[(call, "emits")],
                                  parse_status=status, text=result.error, outcome="failure")
                msg = prompts.format_error(status, result.error)
            self._reject(a, call, ev, msg)
            return
        a.errors = 0
        calls = result.calls
        for extra in calls[self.cfg.max_calls_per_turn:]:
            self.rec.add("dropped_call", agent=a, flows=[(call, "emits")], tool=extra.name,
                         args=canonical_json(extra.arguments), outcome="unknown")
        for c in calls[: self.cfg.max_calls_per_turn]:
            if a.done or self.finished:
                break
            if not c.valid:  # a later call of a multi-call completion can fail on its own
                kind = "invalid_tool" if c.status == "invalid_tool" else "parse_error"
                self.counts[kind] += 1
                ev = self.rec.add(kind, agent=a, flows=[(call, "emits")], tool=c.name,
                                  args=canonical_json(c.arguments), parse_status=c.status,
                                  text=c.error, outcome="failure")
                msg = prompts.invalid_tool(c.name) if kind == "invalid_tool" else \
                    prompts.format_error(c.status, c.error)
                res = self.rec.add("tool_result", agent=a, links=[(ev, "feedback")], text=msg,
                                   outcome="failure")
                self._observe(a, res, msg)
                continue
            self._execute(a, call, c.name, dict(c.arguments))

    def _repeated(self, a: AgentRun, call: int, tool: str, args_s: str) -> bool:
        """Count an identical call (same agent instance, tool and arguments); True when it
        reaches ``max_identical_calls``: the agent is stopped and the call never proposed."""
        key = f"{tool}\x00{args_s}"
        n = a.calls_seen.get(key, 0) + 1
        a.calls_seen[key] = n
        if n > 1:
            self.counts["repeated_calls"] += 1
        limit = self.cfg.max_identical_calls
        if limit and n >= limit:
            self.status = "repeat_limit"
            fin = self.rec.add("final_answer", agent=a, flows=[(call, "emits")],
                               text=f"(no answer: {n} identical {tool} calls)",
                               outcome="failure")
            self._end_agent(a, f"(no answer: {n} identical {tool} calls)", fin)
            return True
        return False

    def _field_taint(self, a: AgentRun, tool: str, args: dict[str, Any]) -> dict[str, bool]:
        spec = TOOLS[tool]
        if not a.tainted_text:
            return {name: False for name in args}
        return {name: value_tainted(v, spec.role(name) or "content", a.tainted_text,
                                    self.trusted) for name, v in args.items()}

    def _execute(self, a: AgentRun, call: int, tool: str, args: dict[str, Any],
                 origin: str | None = None) -> None:
        spec = TOOLS[tool]
        hints = {k: args.pop(k) for k in list(args) if k in ("delegation_id", "principal",
                                                           "principal_id", "on_behalf_of")}
        args_s = canonical_json(args)
        if origin is None:
            if self._repeated(a, call, tool, args_s):
                return
            self.counts["proposals"] += 1
            call_id = f"c{self.counts['proposals']}"
        else:
            call_id = f"{origin}-{self.counts['prefilled']}"
        high = is_high_risk(tool, self.s.memory_high_risk)
        bound = self.gateway.bind(a.delegation_id, a.agent_id, a.instance, tool, args, hints)
        ftaint = self._field_taint(a, tool, args)
        g = self.effects.authorize(a, call, tool, args, args_s, call_id, high, bound, ftaint,
                                   origin, self.session)
        if g.blocked is not None:
            self._observe(a, *g.blocked)
            return
        args = g.args
        if g.decision.rollback:
            self._observe(a, *self.effects.policy_rollback(
                a, g.decision.rollback, g.prop, g.gate, call_id, tool, args, bound, self.session))
            return
        if spec.kind == "read":
            res, text = self.effects.read(a, tool, args, g.prop, call_id)
        elif spec.kind == "agent":
            self._agent_tool(a, tool, args, g.prop, call_id)
            return
        else:
            n = len(self.commits)
            res, text = self.effects.commit(a, tool, args, g.prop, g.gate, call_id, high,
                                            bound, self.session)
            if len(self.commits) > n and self.host.has("after_commit"):
                res, text = self._after_commit(a, res, text)
        self._read_output(a, tool, call_id, res, None, None)

    # ------------------------------------------------------------------ defense hooks

    def _read_output(self, a: AgentRun, tool: str, call_id: str | None, seq: int,
                     payload: str | None, render: Callable[[str], str] | None) -> None:
        """The agent reads a tool's output (node ``seq``); a successful output goes through
        the defense's ``inspect_output`` first. ``payload`` / ``render``: the raw output and
        how the agent is shown it (default: the result node's text as an observation)."""
        ev = self.rec.events[seq]
        if payload is None:
            payload = ev.get("text") or ""
        if ev.get("outcome") == "failure":  # an error or a refusal, already worded
            self._observe(a, seq, payload)
            return
        show = render or (lambda text: prompts.observation(tool, text))
        if not self.host.has("inspect_output"):
            self._observe(a, seq, show(payload))
            return
        self.effects.sync()
        out = ToolOutput(tool, call_id, a.agent_id, payload, self.rec.tainted(seq),
                         self.rec.labels[seq])
        cur, text = seq, payload
        for st in self.host.inspect_output(out):
            v = st.result
            ev_json = {**v.evidence, **({"score": v.score} if v.score is not None else {})}
            common = {"agent": a, "tool": tool, "call_id": call_id, "decision": v.action,
                      "rule_id": v.rule_id, "layer": st.layer,
                      "evidence": canonical_json(ev_json) if ev_json else None}
            if v.action in (REWRITE, REDACT):  # still derived from the output: taint flows
                cur = self.rec.add("output_check", flows=[(cur, "rewrites")], text=v.text,
                                   **common)
                text = v.text or ""
            elif v.action == WITHHOLD:  # nothing of the output reaches the agent
                text = v.text or prompts.withheld(tool, v.rule_id)
                cur = self.rec.add("output_check", links=[(cur, "audit")], text=text,
                                   **common)
            else:  # flag: recorded, the output passes as it is
                self.rec.add("output_check", links=[(cur, "audit")], **common)
        self._observe(a, cur, show(text))

    def _check_answer(self, a: AgentRun, fin: int, text: str) -> tuple[int, str]:
        self.effects.sync()
        answer = Answer(a.agent_id, text, self.session, a.parent is None)
        for st in self.host.check_answer(answer):
            v = st.result
            common = {"agent": a, "decision": v.action, "rule_id": v.rule_id,
                      "layer": st.layer,
                      "evidence": canonical_json(dict(v.evidence)) if v.evidence else None}
            if v.action == REWRITE:
                text = v.text or ""
                fin = self.rec.add("answer_check", flows=[(fin, "rewrites")], text=text,
                                   **common)
            else:  # withhold
                text = v.text or prompts.answer_withheld(v.rule_id)
                fin = self.rec.add("answer_check", links=[(fin, "audit")], text=text,
                                   **common)
        return fin, text

    def _after_commit(self, a: AgentRun, res: int, text: str) -> tuple[int, str]:
        """``after_commit``: a layer may ask for the commit to be reverted (its undo record);
        the agent is told instead of reading the commit's result."""
        c = self.commits[-1]
        self.effects.sync()
        view = self.host.state.trace.commits()[-1]
        st = self.host.after_commit(view)
        if st is None:
            return res, text
        v = st.result
        chk = self.rec.add("commit_check", agent=a, links=[(c["seq"], "audit")],
                           tool=c["tool"], commit_id=c["commit_id"], decision=v.action,
                           rule_id=v.rule_id, layer=st.layer,
                           evidence=canonical_json(dict(v.evidence)) if v.evidence else None)
        rb = self.effects.revert(c["commit_id"], chk, a)
        msg = prompts.rolled_back(c["tool"], v.rule_id)
        out = self.rec.add("tool_result", agent=a, links=[(rb, "result")], tool=c["tool"],
                           outcome="failure", text=msg)
        return out, msg

    # ------------------------------------------------------------------ agent tools

    def _agent_tool(self, a: AgentRun, tool: str, args: dict[str, Any], prop: int,
                    call_id: str) -> None:
        target = args["worker"] if tool == "delegate" else args["to"]  # ToolSpec.agent_field
        text = args["task"] if tool == "delegate" else args["note"]
        spec = self.agent_specs.get(target)
        if spec is None or target not in a.targets:
            msg = prompts.unreachable(tool, target, a.targets)
            res = self.rec.add("tool_result", agent=a, links=[(prop, "invocation")],
                               call_id=call_id, tool=tool, outcome="failure", text=msg)
            self._observe(a, res, msg)
            return
        msg = self.rec.add("message", agent=a, flows=[(prop, "sends")], text=text,
                           target=target, call_id=call_id, tool=tool,
                           action_semantic="delegate", resource_class="agent")
        if tool == "delegate":
            a.waiting_call = call_id
            child, task = self._spawn(spec, parent=a, links=[(msg, "delegation")], task=text)
        else:
            a.done = True
            child, task = self._spawn(spec, parent=a, links=[(msg, "delegation")], task=text)
            child.parent = None  # a handoff does not return; lineage stays in the delegation
        # what a supervisor-worker framework passes along: the user's (trusted) task of this
        # session and the sender's text, in one user turn (docs/scenarios.md; the paper is
        # silent on what a delegated agent is shown)
        goal = self.s.goals[self.session - 1]
        gseq = self.rec.add("user_goal", agent=child, text=goal)
        recv = self.rec.add("message", agent=child, flows=[(msg, "receives")], text=text,
                            call_id=call_id, action_semantic="read", resource_class="agent")
        child.messages.append({"role": "user", "content": prompts.delegated(
            goal, a.agent_id, tool, task)})
        child.inbox.extend([(gseq, goal), (recv, task)])
        if is_tainted(self.rec.labels[recv]):
            child.tainted_text.add(text)
        self.active = child

    # ------------------------------------------------------------------ output

    def env_diff(self) -> dict[str, Any]:
        return diff(self.before, self.world.snapshot())
