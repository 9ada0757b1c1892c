"""The defense API: one ``Defense`` with optional hooks, each returning a typed result.

A runtime defense meets an agent at six points, in this order (paper 000 §5.4 and
Appendix H give the authorization point; the others are the points the field's defenses
act at: tool filtering and prompt rewriting before the first model call, detectors and
delimiters on a tool's output before the model reads it, checks on the final answer):

=================  ======================================  ==============================
hook               when the runtime calls it               returns
=================  ======================================  ==============================
``plan_task``      an agent starts, before its first call  :class:`TaskPlan`
``inspect_output`` a tool's output, before an agent reads  :class:`OutputVerdict`
``authorize``      a parsed, valid proposal, at k(q)       :class:`Decision`
``confirm``        a proposal routed to confirmation       :class:`Confirmation`
``after_commit``   a side effect was committed             :class:`CommitVerdict`
``check_answer``   an agent's final answer                 :class:`AnswerVerdict`
=================  ======================================  ==============================

A defense implements only the hooks it needs (as a pluggy plugin implements only some hook
specifications): a defense that only overrides ``authorize`` is as short as a policy was
before this API. Every hook receives the :class:`~containmentbench.defense.context.
DefenseContext` of its rollout, which holds only what a deployed system could know.
Returning ``None`` from a hook means "nothing to do" (pass, allow, approve-nothing, keep).

Every result carries a stable ``rule_id`` (paper 000 Appendix H: "each block, confirmation,
rollback, and commit is tied to a rule identifier") and JSON evidence; the runtime records
both, with the deciding layer of a stack, in the trace.
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from containmentbench.defense.errors import DefenseError, HookError, UndeclaredAssumption

if TYPE_CHECKING:
    from containmentbench.defense.context import (
        Answer,
        Commit,
        DefenseContext,
        TaskView,
        ToolCall,
        ToolOutput,
    )

ALLOW, BLOCK, CONFIRM, REWRITE = "allow", "block", "confirm", "rewrite"
VERDICTS = (ALLOW, BLOCK, CONFIRM, REWRITE)

PASS, REDACT, WITHHOLD, FLAG = "pass", "redact", "withhold", "flag"
OUTPUT_ACTIONS = (PASS, REWRITE, REDACT, WITHHOLD, FLAG)
KEEP, ROLLBACK = "keep", "rollback"
ANSWER_ACTIONS = (PASS, REWRITE, WITHHOLD)

__all__ = ["DefenseError", "HookError", "UndeclaredAssumption"]  # re-exported errors

HOOKS = ("plan_task", "inspect_output", "authorize", "confirm", "after_commit", "check_answer")

#: what a defense may declare it assumes (paper 000 §5.4: the intent-aware policies "assume a
#: correct structured authorization ledger"); the context hands out each only when declared
ASSUMPTIONS = {
    "intent_ledger": "the trusted structured intent ledger of the user task (eq. 8-9)",
    "task_boundary": "the tool and target constraints of the trusted task configuration",
    "data_labels": "the deployment's data classification: secrets and who is cleared (Leak)",
    "model": "a model the defense may call (counted as the defense's cost)",
}


def _evidence(ev: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(ev) if ev else {}


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer of ``authorize`` for one proposal.

    ``verdict``: allow | block | confirm | rewrite (execute with ``args`` instead of the
    proposed arguments). ``ledger_match``: whether the call matched the trusted ledger (eq. 9),
    for defenses that read one. ``rollback``: commit ids to revert *instead of* executing the
    call (the recovery path of ``rollback_v2``, §5.6)."""

    verdict: str
    rule_id: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    ledger_match: bool | None = None
    rollback: tuple[str, ...] = ()
    args: Mapping[str, Any] | None = None

    @classmethod
    def allow(cls, rule_id: str, evidence: Mapping[str, Any] | None = None,
              ledger_match: bool | None = None) -> Decision:
        return cls(ALLOW, rule_id, _evidence(evidence), ledger_match)

    @classmethod
    def block(cls, rule_id: str, evidence: Mapping[str, Any] | None = None,
              ledger_match: bool | None = None) -> Decision:
        return cls(BLOCK, rule_id, _evidence(evidence), ledger_match)

    @classmethod
    def confirm(cls, rule_id: str, evidence: Mapping[str, Any] | None = None,
                ledger_match: bool | None = None) -> Decision:
        return cls(CONFIRM, rule_id, _evidence(evidence), ledger_match)

    @classmethod
    def rewrite(cls, args: Mapping[str, Any], rule_id: str,
                evidence: Mapping[str, Any] | None = None) -> Decision:
        return cls(REWRITE, rule_id, _evidence(evidence), None, (), dict(args))


@dataclass(frozen=True, slots=True)
class Confirmation:
    """The synthetic user's answer on the confirmation path (no human in the loop)."""

    approved: bool
    rule_id: str


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """What ``plan_task`` changes before an agent's first model call: ``guidance`` appended
    to its system prompt, ``tools`` the only tools it is offered (a subset of its own; None
    keeps all), ``task`` a rewritten task text (None keeps it)."""

    rule_id: str
    guidance: str | None = None
    tools: frozenset[str] | None = None
    task: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def changes(self) -> bool:
        return self.guidance is not None or self.tools is not None or self.task is not None


@dataclass(frozen=True, slots=True)
class OutputVerdict:
    """What ``inspect_output`` does with a tool's output before an agent reads it.

    ``pass``; ``rewrite`` / ``redact`` (the agent reads ``text`` instead: delimiting,
    spotlighting, a sanitizer; the result still derives from the output, so its taint stays);
    ``withhold`` (the agent reads ``text`` or a notice, and nothing of the output: no taint
    flows); ``flag`` (pass, with a detector ``score`` recorded)."""

    action: str
    rule_id: str
    text: str | None = None
    score: float | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def passed(cls, rule_id: str = "output_pass", score: float | None = None) -> OutputVerdict:
        return cls(PASS, rule_id, None, score)

    @classmethod
    def rewrite(cls, text: str, rule_id: str, score: float | None = None,
                evidence: Mapping[str, Any] | None = None) -> OutputVerdict:
        return cls(REWRITE, rule_id, text, score, _evidence(evidence))

    @classmethod
    def redact(cls, text: str, rule_id: str, score: float | None = None,
               evidence: Mapping[str, Any] | None = None) -> OutputVerdict:
        return cls(REDACT, rule_id, text, score, _evidence(evidence))

    @classmethod
    def withhold(cls, rule_id: str, text: str | None = None, score: float | None = None,
                 evidence: Mapping[str, Any] | None = None) -> OutputVerdict:
        return cls(WITHHOLD, rule_id, text, score, _evidence(evidence))

    @classmethod
    def flag(cls, score: float, rule_id: str,
             evidence: Mapping[str, Any] | None = None) -> OutputVerdict:
        return cls(FLAG, rule_id, None, score, _evidence(evidence))


@dataclass(frozen=True, slots=True)
class CommitVerdict:
    """After a commit: ``keep`` it or ``rollback`` (revert it through its undo record)."""

    action: str
    rule_id: str
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def keep(cls, rule_id: str = "commit_kept") -> CommitVerdict:
        return cls(KEEP, rule_id)

    @classmethod
    def rollback(cls, rule_id: str, evidence: Mapping[str, Any] | None = None
                 ) -> CommitVerdict:
        return cls(ROLLBACK, rule_id, _evidence(evidence))


@dataclass(frozen=True, slots=True)
class AnswerVerdict:
    """On an agent's final answer: ``pass``, ``rewrite`` (``text`` replaces it) or
    ``withhold`` (the answer is replaced by a notice)."""

    action: str
    rule_id: str
    text: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def passed(cls, rule_id: str = "answer_pass") -> AnswerVerdict:
        return cls(PASS, rule_id)

    @classmethod
    def rewrite(cls, text: str, rule_id: str,
                evidence: Mapping[str, Any] | None = None) -> AnswerVerdict:
        return cls(REWRITE, rule_id, text, _evidence(evidence))

    @classmethod
    def withhold(cls, rule_id: str, text: str | None = None,
                 evidence: Mapping[str, Any] | None = None) -> AnswerVerdict:
        return cls(WITHHOLD, rule_id, text, _evidence(evidence))


@dataclass(frozen=True, slots=True)
class DefenseConfig:
    """One configured defense: its registered ``name`` (the code), the configuration's
    ``key`` in the study (several keys may configure one name), its ``method_version``,
    ``family``, the static ``prompt_guidance`` the runtime adds to every agent's system
    prompt, and free ``params``."""

    name: str
    method_version: str
    family: str
    prompt_guidance: str | None
    params: Mapping[str, Any]
    key: str = ""
    impl: str | None = None

    def canonical(self) -> dict[str, Any]:
        """What the policy hash covers (the configuration, paper 000 §6.1 "policy hashes";
        ``key`` and ``impl`` only say where it came from; the code has its own digest)."""
        return {"name": self.name, "method_version": self.method_version,
                "family": self.family, "prompt_guidance": self.prompt_guidance,
                "params": dict(self.params)}

    @property
    def policy_hash(self) -> str:
        from containmentbench.canonical import sha256_json

        return sha256_json(self.canonical())


class Defense:
    """Base class of every defense. Subclasses override the hooks they need.

    Class attributes: ``name`` (the name it registers under when it is built in; a user's
    defense gets its name from its configuration), ``assumes`` (the knowledge it reads:
    keys of :data:`ASSUMPTIONS`; may also be a property over ``self.params``)."""

    name: ClassVar[str] = ""
    assumes: ClassVar[frozenset[str]] | frozenset[str] = frozenset()

    def __init__(self, config: DefenseConfig) -> None:
        self.config = config
        self.params: dict[str, Any] = dict(config.params)

    # the hooks (subclasses override any of them; the base does nothing)
    def plan_task(self, task: TaskView, ctx: DefenseContext) -> TaskPlan | None:
        return None

    def inspect_output(self, out: ToolOutput, ctx: DefenseContext) -> OutputVerdict | None:
        return None

    def authorize(self, call: ToolCall, ctx: DefenseContext) -> Decision | None:
        return None

    def confirm(self, call: ToolCall, ctx: DefenseContext) -> Confirmation | None:
        return None

    def after_commit(self, commit: Commit, ctx: DefenseContext) -> CommitVerdict | None:
        return None

    def check_answer(self, answer: Answer, ctx: DefenseContext) -> AnswerVerdict | None:
        return None

    # ------------------------------------------------------------------ facts

    @property
    def label(self) -> str:
        """The name this configured defense has in a study (its configuration key)."""
        return self.config.key or self.config.name

    @property
    def policy_hash(self) -> str:
        return self.config.policy_hash

    @property
    def method_version(self) -> str:
        return self.config.method_version

    @property
    def prompt_guidance(self) -> str | None:
        return self.config.prompt_guidance

    @property
    def hooks(self) -> tuple[str, ...]:
        """The hooks this defense implements (overrides of the base), in hook order."""
        return implemented_hooks(type(self))


@functools.lru_cache(maxsize=256)
def implemented_hooks(cls: type) -> tuple[str, ...]:
    """The hooks a class overrides (asked at every step of every rollout: computed once)."""
    return tuple(h for h in HOOKS if getattr(cls, h, None) is not getattr(Defense, h))


_NOT_HOOKS = frozenset(dir(Defense)) | {"label", "hooks"}


def check_class(cls: Any, where: str) -> None:
    """A defense class is a :class:`Defense` subclass whose hook-like methods are hooks: a
    public method whose name is close to a hook name (``inspect_outputs``) or starts with
    ``on_`` is refused as an unknown hook (pluggy refuses an implementation without a
    specification the same way), and ``assumes`` names only known assumptions."""
    if not (isinstance(cls, type) and issubclass(cls, Defense)):
        raise DefenseError(f"{where}: {getattr(cls, '__name__', cls)!r} is not a subclass of "
                           f"containmentbench.defense.Defense")
    for name in sorted(vars(cls)):
        if name.startswith("_") or name in _NOT_HOOKS or not callable(vars(cls)[name]):
            continue
        close = difflib.get_close_matches(name, HOOKS, n=1, cutoff=0.8)
        if close or name.startswith(("on_", "hook_")):
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise DefenseError(f"{where}: unknown hook '{name}'{hint}; hooks are "
                               f"{', '.join(HOOKS)}")
    declared = vars(cls).get("assumes")
    if isinstance(declared, (set, frozenset, tuple, list)):
        check_assumptions(declared, where)


def check_assumptions(declared: Any, where: str) -> frozenset[str]:
    try:
        names = frozenset(declared)
    except TypeError:
        raise DefenseError(f"{where}: assumes must be a set of names, got "
                           f"{type(declared).__name__}") from None
    unknown = sorted(n for n in names if n not in ASSUMPTIONS)
    if unknown:
        raise DefenseError(f"{where}: unknown assumption '{unknown[0]}' (known: "
                           f"{', '.join(ASSUMPTIONS)})")
    return names


# ---------------------------------------------------------------------- result checks


_SCALAR = frozenset({str, bool, int, type(None)})


def _json_ok(value: Any) -> bool:
    """A JSON value (exact types first: every decision of every rollout is checked)."""
    t = type(value)
    if t in _SCALAR:
        return True
    if t is float:
        return math.isfinite(value)
    if t is list or t is tuple:
        return not value or all(_json_ok(v) for v in value)
    if t is dict or isinstance(value, Mapping):
        return not value or all(type(k) is str and _json_ok(v) for k, v in value.items())
    return isinstance(value, (str, int))  # a subclass (an enum of str, a bool)


def _rule(result: Any) -> str | None:
    rule = getattr(result, "rule_id", None)
    if not isinstance(rule, str) or not rule.strip() or len(rule) > 200:
        return "a non-empty rule_id (at most 200 characters)"
    if not _json_ok(getattr(result, "evidence", {})):
        return "evidence that is a JSON object (strings, numbers, lists, objects)"
    return None


def malformed(hook: str, result: Any, tools: frozenset[str] = frozenset()) -> str | None:
    """Why a hook's result is malformed (None when it is well formed)."""
    want = {"plan_task": TaskPlan, "inspect_output": OutputVerdict, "authorize": Decision,
            "confirm": Confirmation, "after_commit": CommitVerdict,
            "check_answer": AnswerVerdict}[hook]
    if not isinstance(result, want):
        return f"returned {type(result).__name__}, expected {want.__name__} or None"
    bad = _rule(result)
    if bad:
        return f"needs {bad}"
    if isinstance(result, Decision):
        if result.verdict not in VERDICTS:
            return f"verdict '{result.verdict}' is not one of {', '.join(VERDICTS)}"
        if result.verdict == REWRITE and not isinstance(result.args, Mapping):
            return "a rewrite decision needs the new args (a mapping)"
        if result.args is not None and not _json_ok(result.args):
            return "rewritten args must be JSON values"
        if not all(isinstance(c, str) for c in result.rollback):
            return "rollback must list commit ids (strings)"
    elif isinstance(result, Confirmation):
        if not isinstance(result.approved, bool):
            return "approved must be True or False"
    elif isinstance(result, OutputVerdict):
        if result.action not in OUTPUT_ACTIONS:
            return f"action '{result.action}' is not one of {', '.join(OUTPUT_ACTIONS)}"
        if result.action in (REWRITE, REDACT) and not isinstance(result.text, str):
            return f"a {result.action} needs the text the agent reads instead"
        if result.score is not None and not (isinstance(result.score, (int, float))
                                             and math.isfinite(result.score)):
            return "score must be a finite number"
    elif isinstance(result, TaskPlan):
        if result.guidance is not None and not isinstance(result.guidance, str):
            return "guidance must be text"
        if result.task is not None and not isinstance(result.task, str):
            return "task must be text"
        if result.tools is not None:
            extra = sorted(set(result.tools) - tools) if tools else []
            if extra:
                return f"tools may only keep the agent's own tools ('{extra[0]}' is not one)"
    elif isinstance(result, CommitVerdict):
        if result.action not in (KEEP, ROLLBACK):
            return f"action '{result.action}' is not keep or rollback"
    elif isinstance(result, AnswerVerdict):
        if result.action not in ANSWER_ACTIONS:
            return f"action '{result.action}' is not one of {', '.join(ANSWER_ACTIONS)}"
        if result.action == REWRITE and not isinstance(result.text, str):
            return "a rewrite needs the new answer text"
    return None
