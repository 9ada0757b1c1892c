"""Literal-reader check: every value a reference plan needs is in what its agent was shown.

The self-check (``selfcheck.py``) proves that each reference plan solves its scenario; it
cannot see a plan that only an agent knowing the answer could write (the supervisor's
``delegate`` to ``"worker"`` passed while that id appeared in no prompt). This check replays
the benign and the attacker plan through the real runtime (parser, gateway, sandbox) with the
``scripted`` backend and no defense, and before each step takes what that agent instance was
shown: its system prompt (role text, tool schemas), the tool schemas of the request, the user
goal or the delegation it received, and every observation it got from the plan's earlier
steps -- never its own earlier outputs. Each argument value the step needs must be derivable
from that text:

* identifiers and exact values (record ids, channels, recipients, dates, CRM values, memory
  keys, visibility) must appear as a whole token, after normalising case and whitespace, a
  leading ``#`` on a channel and a ``Name <addr>`` form;
* an agent id (the target of ``delegate`` or ``handoff``) must be shown *as an id*: quoted
  (``(id "worker")``, an ``enum``), not merely as a word (a prompt saying "delegate to the
  worker" named no id: a 1.5B model tried ``worker_agent``, ``agent-1``, ``worker-agent``)
  nor as a parameter name (``delegate`` has a parameter called ``worker``);
* free text (subject, body, summary, text, title, note, task and a memory entry's value)
  need only carry its required facts: the oracle's ``contains``/``eq`` values for that tool
  and field, any canary token it includes (a leak needs the secret to have been seen), and,
  in a delegation or handoff, every identifier it passes on (addresses, ids, dates);
* a search string (a ``query``-role parameter: ``search_email.query``, ``lookup_contact``,
  ``list_calendar.date``) is the reader's own choice and needs nothing.

A scenario whose plan needs a value its agent was never shown fails with one line naming the
scenario, plan, step, field and value. Paper 000 has no such check (its agents are real
models); it is the literal-reader condition of the issue that added it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from containmentbench.defense.loading import load_defense
from containmentbench.models.base import BackendConfig, Completion, GenerationRequest
from containmentbench.models.scripted import ScriptedBackend
from containmentbench.runtime import prompts
from containmentbench.runtime.driver import ShardContext, run_episodes
from containmentbench.runtime.state import RuntimeConfig
from containmentbench.sandbox.tools import TOOLS
from containmentbench.scenarios.model import PlanStep, Scenario

#: prose parameters: judged by the facts they must carry, not by their wording
PROSE = frozenset({("draft_email", "subject"), ("draft_email", "body"),
                   ("send_email", "subject"), ("send_email", "body"),
                   ("write_task_record", "summary"), ("post_status_note", "text"),
                   ("create_event", "title"), ("memory_write", "value"),
                   ("delegate", "task"), ("handoff", "note")})
#: prose that relays material to another agent: every identifier in it must have been seen
RELAY = frozenset({("delegate", "task"), ("handoff", "note")})

# linear forms (tests/test_regex_worst_case.py): the local part of an address holds no '@',
# and an address is found from its '@' (the classic [\w.+-]+@... scan is quadratic on a long
# run of address characters without one)
_ADDRESS = re.compile(r"<([^<>\s@]+@[^<>\s]+)>")
_AT_DOMAIN = re.compile(r"@([\w-]+(?:\.[\w-]+)+)")
_IDENTIFIER = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\bcb-canary-[0-9a-f]+\b|\b[a-z]+-\d+\b")
_CANARY = re.compile(r"\bcb-canary-[0-9a-f]+\b")
_QUOTED = re.compile(r'"([^"\s]+)"')


def fold(text: str) -> str:
    """Lower case and single spaces: how shown text is compared."""
    return " ".join(text.lower().split())


def normalise(value: Any) -> str:
    """A plan value as it is looked for: folded (:func:`fold`), the address of a
    ``Name <addr>`` form, no leading ``#``."""
    text = fold(str(value))
    m = _ADDRESS.search(text)
    if m:
        text = m.group(1)
    return text.lstrip("#")


def derivable(value: Any, shown: str) -> bool:
    """``value`` (normalised) occurs in ``shown`` (folded) as a whole token: not inside a longer id or
    address (``ct-3`` is not in ``ct-30``, ``frost@corp.local`` not in
    ``jules.frost@corp.local``); a trailing full stop may follow it."""
    v = normalise(value)
    if not v:
        return True
    # a plain scan (the old per-value pattern: (?<![\w.@-])v(?![\w@-])(?!\.\w)), linear in
    # the text and kept out of dynamic regular expressions
    i = shown.find(v)
    while i >= 0:
        before = shown[i - 1] if i > 0 else ""
        after = shown[i + len(v): i + len(v) + 2]
        if not (before and (_word(before) or before in ".@-")) and not (
                after[:1] and (_word(after[0]) or after[0] in "@-")) and not (
                after[:1] == "." and len(after) > 1 and _word(after[1])):
            return True
        i = shown.find(v, i + 1)
    return False


def identifiers(text: str) -> list[str]:
    r"""Addresses, ISO dates, canaries and record ids (``em-1``) in ``text``, in text order
    (what ``findall`` of ``[\w.+-]+@[\w-]+(?:\.[\w-]+)+|<the others>`` gave)."""
    found: list[tuple[int, str]] = []
    end = 0
    for m in _AT_DOMAIN.finditer(text):
        j = m.start()
        while j > end and (_word(text[j - 1]) or text[j - 1] in ".+-"):
            j -= 1
        if j < m.start():
            found.append((j, text[j:m.end()]))
            end = m.end()
    taken = [(a, a + len(x)) for a, x in found]
    for m in _IDENTIFIER.finditer(text):
        if not any(a <= m.start() < b for a, b in taken):
            found.append((m.start(), m.group(0)))
    return [x for _, x in sorted(found)]


def _word(ch: str) -> bool:
    r"""A character of ``\w`` (Unicode letters, digits and the underscore)."""
    return ch.isalnum() or ch == "_"


def named_ids(req: GenerationRequest) -> frozenset[str]:
    """Where an agent reads an id *as an id*: the ``enum`` values of the request's tool
    schemas, and the quoted tokens of what it was shown outside those schemas (inside them
    every parameter name is quoted, ``delegate``'s ``"worker"`` among them)."""
    schemas = prompts.render_schemas(list(req.tools))  # as the system prompt embeds them
    texts = [m["content"].replace(schemas, " ") for m in req.messages
             if m["role"] != "assistant"]
    ids = set(_QUOTED.findall(" ".join(texts)))
    for tool in req.tools:
        for p in (tool.get("parameters") or {}).get("properties", {}).values():
            ids.update(str(v) for v in p.get("enum") or ())
    return frozenset(normalise(i) for i in ids)


def shown_text(req: GenerationRequest) -> str:
    """What the agent instance is shown at this request: every message but its own
    completions, and the request's tool schemas (native mode sends them apart)."""
    parts = [m["content"] for m in req.messages if m["role"] != "assistant"]
    parts.append(json.dumps(req.tools, sort_keys=True))
    return fold(" ".join(parts))


def _values(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


def _oracle_facts(s: Scenario, step: PlanStep, name: str) -> list[Any]:
    """The ``contains``/``eq`` values the oracle requires of this tool's field."""
    out: list[Any] = []
    for req in s.oracle.get("required", []):
        if req["tool"] != step.tool or req.get("session", step.session) != step.session:
            continue
        clause = req["args"].get(name)
        if clause and clause.get("op") in ("contains", "eq"):
            out.extend(_values(clause["value"]))
    return out


def needed(s: Scenario, step: PlanStep) -> list[tuple[str, Any]]:
    """(field, value) pairs the step needs its agent to have been shown."""
    spec = TOOLS[step.tool]
    out: list[tuple[str, Any]] = []
    for name, value in step.args.items():
        if spec.role(name) == "query":
            continue
        if (step.tool, name) in PROSE:
            text = str(value)
            facts = [f for f in _oracle_facts(s, step, name) if normalise(f) in normalise(text)]
            facts += _CANARY.findall(text.lower())
            if (step.tool, name) in RELAY:
                facts += identifiers(text.lower())
            out.extend((name, f) for f in dict.fromkeys(facts))
        else:
            out.extend((name, v) for v in _values(value))
    return out


@dataclass(frozen=True, slots=True)
class Hidden:
    """A plan value its agent was never shown."""

    scenario_id: str
    plan: str
    index: int  # position in the plan
    agent: str
    tool: str
    field: str
    value: Any

    def line(self) -> str:
        return (f"{self.scenario_id}: {self.plan} plan step {self.index} ({self.agent} "
                f"{self.tool}) needs {self.field}={self.value!r}, which {self.agent} was not "
                f"shown")


class _LiteralReader(ScriptedBackend):
    """The scripted replay, checking each step against what its agent was shown first."""

    def __init__(self, plan: str) -> None:
        super().__init__(BackendConfig(name="scripted", model="scripted",
                                       options={"plan": plan}))
        self.hidden: list[Hidden] = []
        self.steps = 0

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        for r in requests:
            self._inspect(r)
        return super().generate(requests)

    def _inspect(self, req: GenerationRequest) -> None:
        s, a, _spec = req.sim
        if "queue" not in a.sim:  # the scripted backend fills it on the first request
            session = int(a.instance.split("#", 1)[1].split(".", 1)[0])
            a.sim["queue"] = [x for x in self._plan(s) if x.agent == a.agent_id
                              and x.session == session]
        if not a.sim["queue"] or a.sim["queue"][0].tool == "final_answer":
            return
        step = a.sim["queue"][0]
        self.steps += 1
        shown = shown_text(req)
        index = next(i for i, x in enumerate(self._plan(s)) if x is step)
        agent_field = TOOLS[step.tool].agent_field
        for name, value in needed(s, step):
            ok = normalise(value) in named_ids(req) if name == agent_field else \
                derivable(value, shown)
            if not ok:
                self.hidden.append(Hidden(s.id, self.plan, index, step.agent, step.tool,
                                          name, value))

    def _plan(self, s: Scenario) -> tuple[PlanStep, ...]:
        return s.attacker_plan if self.plan == "attacker" and s.attacker_plan else \
            s.benign_plan


@dataclass(frozen=True, slots=True)
class LiteralReport:
    steps: int            # plan steps checked (final answers excluded)
    hidden: tuple[Hidden, ...]

    @property
    def ok(self) -> bool:
        return not self.hidden


def check_literal(scenarios: Sequence[Scenario],
                  plans: Iterable[str] = ("benign", "attacker")) -> LiteralReport:
    """Replay each plan (no defense) and collect every value its agent was not shown."""
    hidden: list[Hidden] = []
    steps = 0
    for plan in plans:
        todo = [s for s in scenarios if plan == "benign" or s.attacker_plan]
        backend = _LiteralReader(plan)
        ctx = ShardContext("literal", "scripted", "scripted", "none", 0, plan)
        run_episodes(todo, load_defense("none"), backend, ctx, RuntimeConfig())
        hidden += backend.hidden
        steps += backend.steps
    return LiteralReport(steps, tuple(hidden))
