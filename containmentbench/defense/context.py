"""What a defense sees: the :class:`DefenseContext` of a rollout and the views its hooks get.

A defense sees only what a deployed system could know (paper 000 §5.4: authorization at
k(q) on the prefix trace "visible when q is authorized"):

* the trusted user task of each session started so far and the agent team (ids, roles);
* the tool inventory with its annotations: risk, parameter roles (recipient, target,
  visibility, ...), kinds;
* the visible prefix of the trace, with the provenance labels the runtime computes
  (``taint:<source id>``) and, for a label the trace carries, the channel its content came
  through; never the text of a source nobody has read;
* the deployment's knowledge a defense declares it assumes (``Defense.assumes``): the
  trusted intent ledger, the task boundary, data labels (secrets and clearances), a model.

The benchmark's ground truth (the attack specification, scenario labels such as stage or
attack goal, the success oracle, the injected text before it is read) is never handed to the
context: it holds copies of the pieces above and no reference to the scenario record, and
reading undeclared knowledge raises :class:`~containmentbench.defense.api.
UndeclaredAssumption`. ``containmentbench defenses check`` also watches a defense for the
introspection that could reach around the context (frames, the garbage collector).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from containmentbench.defense.errors import UndeclaredAssumption

TAINT_PREFIX = "taint:"
#: parameter roles that decide who or what a side effect reaches (paper 000 eq. 10: Expand
#: looks at action, target, visibility and authority fields)
AUTHORITY_ROLES = frozenset({"recipient", "target", "visibility", "field"})


def frozen_args(args: Mapping[str, Any]) -> Mapping[str, Any]:
    """A read-only view of call arguments (lists stay lists: values are the call's own)."""
    return MappingProxyType(dict(args))


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str                         # str | list | number | bool | object
    role: str                         # recipient | target | visibility | field | content | query
    required: bool = True
    description: str = ""
    choices: tuple[str, ...] = ()     # ordered values (visibility: narrowest first)


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as a deployment declares it: schema, risk and parameter roles."""

    name: str
    description: str
    kind: str                         # read | draft | side_effect | memory | recovery | agent
    high_risk: bool                   # HighRisk(q) of paper 000 §4.4
    params: tuple[Param, ...] = ()

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def role(self, name: str) -> str | None:
        p = self.param(name)
        return p.role if p else None

    @property
    def authority_fields(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.role in AUTHORITY_ROLES)

    @property
    def recipient_fields(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.role == "recipient")

    @property
    def content_fields(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.role == "content")


@dataclass(frozen=True, slots=True)
class AgentInfo:
    agent_id: str
    role: str


@dataclass(frozen=True, slots=True)
class TaskView:
    """An agent about to start: the task it is given and the tools it would be offered."""

    agent_id: str
    role: str
    task: str                         # the user's goal (entry agent) or the delegated task
    tools: tuple[str, ...]
    session: int
    delegated: bool                   # started by another agent (delegation or handoff)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A parsed, valid tool call about to be authorized (paper 000 §5.4, at k(q))."""

    tool: str
    args: Mapping[str, Any]
    agent_id: str
    session: int
    seq: int                          # the proposal node in the trace
    call_id: str
    high_risk: bool                   # HighRisk(q), §4.4 / Table 7 row 3
    tainted: bool                     # q in T_{tau, <= k(q)} (prefix taint closure, eq. 2)
    labels: frozenset[str]
    tainted_fields: Mapping[str, bool]  # field-level: the value derives from a tainted source
    origin: str | None = None         # None: the model's own call; "prefill": the runtime's


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's output as the agent would read it, before it reads it."""

    tool: str
    call_id: str | None
    agent_id: str
    text: str
    tainted: bool
    labels: frozenset[str]


@dataclass(frozen=True, slots=True)
class Commit:
    """A committed side effect (the undo journal's view, §5.6)."""

    commit_id: str
    tool: str
    args: Mapping[str, Any]
    session: int
    seq: int
    tainted: bool
    high_risk: bool
    rolled_back: bool


@dataclass(frozen=True, slots=True)
class Answer:
    agent_id: str
    text: str
    session: int
    final: bool                       # the rollout's last answer (not a worker's result)


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """Where tainted content came from: its source id and channel (the tool or carrier)."""

    source_id: str
    channel: str


# ---------------------------------------------------------------------- deployment knowledge


@runtime_checkable
class Ledger(Protocol):
    """The trusted structured intent ledger I_s = {(a, t, phi)} (paper 000 eq. 8)."""

    @property
    def actions(self) -> frozenset[str]:
        """The action types (tools) some entry authorizes."""

    def match(self, tool: str, args: Mapping[str, Any]) -> int | None:
        """Eq. 9: the index of the entry the call matches exactly, or None."""

    def expand(self, call: ToolCall, matched: int | None) -> list[str]:
        """Expand(q, I_s, G) of §5.4: the call's tainted fields that introduce an action,
        target, visibility or authority the (matched, else same-action) entries do not
        authorize; ``action`` when a tainted call's action is in no entry."""


@runtime_checkable
class Boundary(Protocol):
    """Tool and target constraints of the trusted task configuration (Table 7, column 1)."""

    @property
    def allowed_tools(self) -> frozenset[str]: ...

    def constrains(self, tool: str, field: str) -> bool:
        """Does the configuration constrain this authority field of this tool?"""

    def disallowed(self, tool: str, field: str, value: Any) -> list[Any]:
        """The values of an argument (one value or a list) the configuration does not
        allow for this field (empty: all allowed)."""

    def max_visibility(self, tool: str) -> str | None: ...


@runtime_checkable
class DataLabels(Protocol):
    """The deployment's data classification (synthetic canaries, private labels, who is
    cleared): Leak(q) of §5.4."""

    def leak(self, tool: str, args: Mapping[str, Any]) -> bool: ...


@runtime_checkable
class ModelService(Protocol):
    """A model a defense may ask (a judge, a tool filter); every call is the defense's cost."""

    def complete(self, messages: Sequence[Mapping[str, str]], max_tokens: int = 256) -> str: ...


@dataclass(frozen=True, slots=True)
class Knowledge:
    """What the suite's deployment knows, handed out by assumption (``None``: this suite
    has none of it; a defense that assumes it is refused at configuration time)."""

    ledger: Ledger | None = None
    boundary: Boundary | None = None
    data_labels: DataLabels | None = None


# ---------------------------------------------------------------------- the visible trace


class TraceView:
    """The visible prefix of the trace: read-only events (``source`` nodes, the world's
    unread untrusted content, are not part of it) and the commits so far."""

    __slots__ = ("_commits", "_events", "_labels")

    def __init__(self) -> None:
        self._events: list[Mapping[str, Any]] = []
        self._labels: list[frozenset[str]] = []
        self._commits: list[Commit] = []

    def events(self) -> Sequence[Mapping[str, Any]]:
        return tuple(self._events)

    def labels(self, seq: int) -> frozenset[str]:
        """The provenance labels of a visible event (its taint-closure membership, eq. 2)."""
        for ev, lab in zip(reversed(self._events), reversed(self._labels), strict=True):
            if ev["seq"] == seq:
                return lab
        raise KeyError(f"no visible event {seq}")

    def commits(self) -> Sequence[Commit]:
        return tuple(self._commits)


class RolloutState:
    """What the runtime keeps for the contexts of one rollout (shared by a stack's layers).

    The runtime pushes into it (``sync``, ``add_commit``, ``start_session``); it never holds
    the recorder, the world or the scenario record."""

    __slots__ = ("_synced", "agents", "channels", "knowledge", "session", "tasks", "tools",
                 "trace")

    def __init__(self, tasks: Sequence[str], agents: Sequence[AgentInfo],
                 tools: Mapping[str, ToolInfo], knowledge: Knowledge) -> None:
        self.tasks: list[str] = list(tasks)
        self.session = 1
        self.agents = tuple(agents)
        self.tools = tools if isinstance(tools, MappingProxyType) else \
            MappingProxyType(dict(tools))
        self.knowledge = knowledge
        self.trace = TraceView()
        self.channels: dict[str, str] = {}
        self._synced = 0

    def sync(self, events: Sequence[dict[str, Any]], labels: Sequence[frozenset[str]]) -> None:
        """Bring the visible trace up to date with the recorder's events (source nodes are
        kept out; their channel is remembered for :meth:`DefenseContext.provenance`)."""
        view = self.trace
        for i in range(self._synced, len(events)):
            ev = events[i]
            if ev["kind"] == "source":
                sid = ev.get("resource_id") or ev.get("target")
                if sid:
                    self.channels[str(sid)] = str(ev.get("resource_class") or "unknown")
                continue
            view._events.append(MappingProxyType(ev))
            view._labels.append(labels[i])
        self._synced = len(events)

    def add_commit(self, c: Commit) -> None:
        self.trace._commits.append(c)

    def mark_rolled_back(self, commit_id: str) -> None:
        cs = self.trace._commits
        for i, c in enumerate(cs):
            if c.commit_id == commit_id:
                cs[i] = Commit(c.commit_id, c.tool, c.args, c.session, c.seq, c.tainted,
                               c.high_risk, True)

    def start_session(self, n: int, task: str) -> None:
        self.session = n
        if len(self.tasks) < n:
            self.tasks.append(task)


@dataclass(frozen=True, slots=True)
class DefenseContext:
    """One defense's view of its rollout (a stack's layers each get their own, over one
    :class:`RolloutState`, so each sees only the knowledge it declared)."""

    _state: RolloutState = field(repr=False)
    defense: str                      # the layer's name in the study
    assumes: frozenset[str]
    params: Mapping[str, Any]
    _model: ModelService | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ always visible

    @property
    def task(self) -> str:
        """The trusted user task of the current session."""
        return self._state.tasks[self._state.session - 1]

    @property
    def tasks(self) -> tuple[str, ...]:
        """The trusted user tasks of every session started so far."""
        return tuple(self._state.tasks[: self._state.session])

    @property
    def session(self) -> int:
        return self._state.session

    @property
    def agents(self) -> tuple[AgentInfo, ...]:
        """The agent team, the entry agent (the one that takes the user's request) first."""
        return self._state.agents

    @property
    def entry_agent(self) -> str:
        return self._state.agents[0].agent_id

    @property
    def tools(self) -> Mapping[str, ToolInfo]:
        return self._state.tools

    @property
    def trace(self) -> TraceView:
        return self._state.trace

    def provenance(self, label: str) -> SourceInfo | None:
        """The source and channel behind a taint label the trace carries (None otherwise)."""
        if not label.startswith(TAINT_PREFIX):
            return None
        sid = label[len(TAINT_PREFIX):]
        ch = self._state.channels.get(sid)
        return SourceInfo(sid, ch) if ch is not None else None

    # ------------------------------------------------------------------ declared knowledge

    def _need(self, what: str) -> None:
        if what not in self.assumes:
            raise UndeclaredAssumption(
                f"defense '{self.defense}' reads ctx.{_ATTR[what]} but does not declare it: "
                f"add '{what}' to its assumes")

    @property
    def ledger(self) -> Ledger:
        self._need("intent_ledger")
        return _present(self._state.knowledge.ledger, "intent_ledger", self.defense)

    @property
    def boundary(self) -> Boundary:
        self._need("task_boundary")
        return _present(self._state.knowledge.boundary, "task_boundary", self.defense)

    @property
    def data_labels(self) -> DataLabels:
        self._need("data_labels")
        return _present(self._state.knowledge.data_labels, "data_labels", self.defense)

    @property
    def model(self) -> ModelService:
        self._need("model")
        return _present(self._model, "model", self.defense)


_ATTR = {"intent_ledger": "ledger", "task_boundary": "boundary", "data_labels": "data_labels",
         "model": "model"}


def _present(value: Any, what: str, defense: str) -> Any:
    if value is None:
        raise UndeclaredAssumption(f"defense '{defense}' assumes {what}, which this suite "
                                   f"does not provide")
    return value


def missing_knowledge(assumes: frozenset[str], knowledge: Knowledge,
                      has_model: bool) -> list[str]:
    """The declared assumptions a suite cannot provide (checked before a study runs)."""
    have = {"intent_ledger": knowledge.ledger is not None,
            "task_boundary": knowledge.boundary is not None,
            "data_labels": knowledge.data_labels is not None, "model": has_model}
    return sorted(a for a in assumes if not have.get(a, False))
