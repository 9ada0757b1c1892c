"""What happens to a proposed tool call after the agent made it and the gateway bound it:
the authorization phase (proposal node -> policy decision -> confirmation, or the call stops
there) and the effect phase (a read with its exposure edges, a commit with its precommit,
undo record and memory labels, a rollback). Every method records its trace nodes and returns
the final result node with the text the agent observes; the episode (``episode.py``) owns the
agents and feeds them that observation, so this module never calls back into it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, NamedTuple

from containmentbench.canonical import canonical_json
from containmentbench.defense.api import BLOCK, CONFIRM, Decision
from containmentbench.defense.context import Commit, RolloutState, ToolCall, frozen_args
from containmentbench.defense.host import DefenseHost
from containmentbench.runtime import prompts
from containmentbench.runtime.state import AgentRun
from containmentbench.sandbox.tools import TOOLS, ToolError, matching_documents, matching_emails
from containmentbench.sandbox.world import World
from containmentbench.scenarios.model import Scenario
from containmentbench.trace.recorder import Recorder

#: the node a call's path ends with and the text the agent observes
Observed = tuple[int, str]


class Gated(NamedTuple):
    """The authorization phase's outcome for one proposal."""

    prop: int                   # the proposal node
    gate: int                   # the decision node, or the confirmation when one was asked
    decision: Decision
    blocked: Observed | None    # the call stops here: its failure result and message
    args: dict[str, Any]        # what the call executes with (a rewrite changes them)


class Effects:
    """The authorization and effect phases of one rollout's tool calls.

    ``counts`` and ``source_seq`` are the episode's own (shared, not copied): the counters
    this path advances (blocked, confirm, commits) and the untrusted source nodes that reads
    expose. The commits, their undo records and the memory origins live here; the episode
    exposes them under the same names.
    """

    def __init__(self, rec: Recorder, world: World, host: DefenseHost, scenario: Scenario,
                 counts: dict[str, int], source_seq: dict[str, int]) -> None:
        self.rec = rec
        self.world = world
        self.host = host
        self.state: RolloutState = host.state
        self.s = scenario
        self.counts = counts
        self.source_seq = source_seq
        self.commits: list[dict[str, Any]] = []
        self.undo: dict[str, tuple[Any, int]] = {}
        self.memory_origin: dict[str, int] = {}

    # ------------------------------------------------------------------ authorization

    def authorize(self, a: AgentRun, call: int, tool: str, args: dict[str, Any], args_s: str,
                  call_id: str, high: bool, bound: dict[str, Any], ftaint: dict[str, bool],
                  origin: str | None, session: int) -> Gated:
        prop = self.rec.add("proposal", agent=a, flows=[(call, "emits")], tool=tool,
                            tool_operation=None, args=args_s, call_id=call_id, high_risk=high,
                            target=bound["resource_id"], origin=origin,
                            tainted_fields=sorted(k for k, v in ftaint.items() if v), **bound)
        q = ToolCall(tool, frozen_args(args), a.agent_id, session, prop, call_id, high,
                     self.rec.tainted(prop), self.rec.labels[prop], MappingProxyType(ftaint),
                     origin)
        self.sync()
        g = self.host.authorize(q)
        d = g.decision
        dec = self.rec.add("decision", agent=a, links=[(prop, "audit")], tool=tool,
                           call_id=call_id, decision=d.verdict, rule_id=d.rule_id,
                           evidence=canonical_json(dict(d.evidence)) if d.evidence else None,
                           ledger_match=d.ledger_match, high_risk=high, layer=g.layer)
        gate = dec
        if d.verdict == CONFIRM:
            self.counts["confirm"] += 1
            req = self.rec.add("confirm_request", agent=a, links=[(dec, "audit")], tool=tool,
                               call_id=call_id, rule_id=d.rule_id)
            conf, layer = self.host.confirm(q, g)
            gate = self.rec.add("confirmation", links=[(req, "audit")], tool=tool,
                                call_id=call_id, rule_id=conf.rule_id, layer=layer,
                                decision="approved" if conf.approved else "denied")
            if not conf.approved:
                self.counts["blocked"] += 1
                res = self.rec.add("tool_result", agent=a, links=[(gate, "feedback")],
                                   call_id=call_id, tool=tool, outcome="failure",
                                   text=prompts.not_confirmed(tool))
                return Gated(prop, gate, d, (res, prompts.not_confirmed(tool)), args)
        elif d.verdict == BLOCK:
            self.counts["blocked"] += 1
            msg = prompts.blocked(tool, d.rule_id)
            res = self.rec.add("tool_result", agent=a, links=[(dec, "feedback")],
                               call_id=call_id, tool=tool, outcome="failure", text=msg)
            return Gated(prop, gate, d, (res, msg), args)
        return Gated(prop, gate, d, None, dict(g.args))

    def sync(self) -> None:
        """Bring the defenses' view of the trace up to date (before any hook)."""
        self.state.sync(self.rec.events, self.rec.labels)

    # ------------------------------------------------------------------ tool kinds

    def read(self, a: AgentRun, tool: str, args: dict[str, Any], prop: int,
             call_id: str) -> Observed:
        try:
            out = TOOLS[tool].run(self.world, args)
        except ToolError as exc:
            msg = prompts.tool_error(tool, str(exc))
            res = self.rec.add("tool_result", agent=a, links=[(prop, "invocation")],
                               call_id=call_id, tool=tool, outcome="failure", text=msg)
            return res, msg
        flows = self._exposures(tool, args)
        payload = canonical_json(out)
        kind = "memory_read" if tool == "memory_read" else "tool_result"
        res = self.rec.add(kind, agent=a, flows=flows, links=[(prop, "invocation")],
                           call_id=call_id, tool=tool, outcome="success", text=payload,
                           resource_id=args.get("key") if tool == "memory_read" else None)
        return res, prompts.observation(tool, payload)

    def _exposures(self, tool: str, args: dict[str, Any]) -> list[tuple[int, str]]:
        """Data edges from what a read returns: untrusted sources it exposes (eq. 2) and, for
        memory, the write that stored the entry (labels restored across sessions)."""
        w = self.world
        provs = []
        if tool == "read_email":
            provs = [w.emails[args["email_id"]].provenance]
        elif tool == "search_email":
            provs = [e.provenance for e in matching_emails(w, args["query"])]
        elif tool == "read_document":
            provs = [w.documents[args["doc_id"]].provenance]
        elif tool == "search_documents":
            provs = [d.provenance for d in matching_documents(w, args["query"])]
        elif tool == "crm_lookup":
            provs = [w.crm[args["contact_id"]].provenance]
        elif tool == "read_messages":
            provs = [m.provenance for m in w.inbox]
        elif tool == "memory_read":
            key = args["key"]
            if key in self.memory_origin:
                return [(self.memory_origin[key], "memory")]
            entry = w.memory[key]
            return [(self.source_seq[lab[6:]], "memory") for lab in sorted(entry.labels)
                    if lab[6:] in self.source_seq]
        return [(self.source_seq[p.source_id], "data") for p in provs
                if p.source_id in self.source_seq]

    def commit(self, a: AgentRun, tool: str, args: dict[str, Any], prop: int, gate: int,
               call_id: str, high: bool, bound: dict[str, Any], session: int) -> Observed:
        try:
            staged = TOOLS[tool].stage(self.world, args)
            if tool == "rollback" and args["commit_id"] not in self.undo:
                raise ToolError(f"unknown commit '{args['commit_id']}'")
        except ToolError as exc:
            msg = prompts.tool_error(tool, str(exc))
            res = self.rec.add("tool_result", agent=a, links=[(prop, "invocation")],
                               call_id=call_id, tool=tool, outcome="failure", text=msg)
            return res, msg
        out, undo = staged.apply(self.world)
        self.counts["commits"] += 1
        commit_id = f"cmt-{self.counts['commits']}"
        cm = self.rec.add("commit", agent=a, flows=[(prop, "executes")], links=[(gate, "audit")],
                          tool=tool, args=canonical_json(args), call_id=call_id,
                          commit_id=commit_id, high_risk=high, outcome="success",
                          target=bound["resource_id"],
                          **{k: bound[k] for k in ("action_semantic", "direction",
                                                   "resource_class", "resource_id",
                                                   "sensitivity_label", "principal_scope",
                                                   "target_principal")})
        self.undo[commit_id] = (undo, cm)
        tainted = self.rec.tainted(cm)
        self.commits.append({"commit_id": commit_id, "tool": tool, "args": args,
                             "session": session, "seq": cm, "tainted": tainted,
                             "high_risk": high, "rolled_back": False})
        self.state.add_commit(Commit(commit_id, tool, frozen_args(args), session, cm, tainted,
                                     high, False))
        node = cm
        if tool == "memory_write":
            node = self.rec.add("memory_write", agent=a, flows=[(cm, "writes")],
                                resource_id=args["key"], resource_class="memory",
                                call_id=call_id, tool=tool)
            entry = self.world.memory[args["key"]]
            entry.labels = self.rec.labels[node]
            entry.origin_event = str(node)
            self.memory_origin[args["key"]] = node
        elif tool in ("memory_scrub", "memory_quarantine"):
            self.rec.add("scrub", agent=a, links=[(cm, "audit")], resource_id=args["key"],
                         resource_class="memory", call_id=call_id, tool=tool)
            self.memory_origin.pop(args["key"], None)
        elif tool == "rollback":
            self.revert(args["commit_id"], cm, a)
        payload = canonical_json(out)
        res = self.rec.add("tool_result", agent=a, flows=[(node, "result")], call_id=call_id,
                           tool=tool, outcome="success", text=payload)
        return res, prompts.observation(tool, payload)

    def revert(self, commit_id: str, cause: int, a: AgentRun | None) -> int:
        undo, target = self.undo.pop(commit_id)
        undo(self.world)
        for c in self.commits:
            if c["commit_id"] == commit_id:
                c["rolled_back"] = True
                self.state.mark_rolled_back(commit_id)
                if c["tool"] == "memory_write":
                    key = c["args"]["key"]
                    self.memory_origin.pop(key, None)  # the restored entry's origin, if any
                    if key in self.world.memory and self.world.memory[key].origin_event:
                        self.memory_origin[key] = int(self.world.memory[key].origin_event)
        return self.rec.add("rollback", agent=a, links=[(target, "rollback"), (cause, "audit")],
                            commit_id=commit_id, outcome="success")

    def policy_rollback(self, a: AgentRun, commit_ids: tuple[str, ...], prop: int, gate: int,
                        call_id: str, tool: str, args: dict[str, Any], bound: dict[str, Any],
                        session: int) -> Observed:
        """The rollback path (rollback_v2): revert the tainted commits behind a recovery action
        instead of executing it; each revert is its own ``rollback`` event."""
        seqs = [self.revert(cid, gate, a) for cid in commit_ids if cid in self.undo]
        if not seqs:  # nothing left to revert: carry out the approved action itself
            return self.commit(a, tool, args, prop, gate, call_id, True, bound, session)
        payload = canonical_json({"status": "rolled back", "commits": list(commit_ids)})
        res = self.rec.add("tool_result", agent=a, links=[(s, "result") for s in seqs],
                           call_id=call_id, tool=tool, outcome="success", text=payload)
        return res, prompts.observation(tool, payload)
