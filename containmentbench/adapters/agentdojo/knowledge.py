"""What a deployment of an AgentDojo task knows, in the defense API's terms (§6.4).

The same defense object runs on our suites and on AgentDojo's: only the knowledge behind its
context differs. Here the intent ledger is the sink-level authorization projected from the
user task's ground truth (``tasks.TaskSpec.ledger``: eq. 9 at authority level, "only
sink-level user authorization"), the task boundary is the tools and authority values that
ledger names, and there are no data labels to leak (AgentDojo has no synthetic secrets).
The injection task, its ground truth and the placed injections stay with the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from containmentbench.adapters.agentdojo.tools import SINKS, authority_key, norm
from containmentbench.defense.context import Knowledge, Param, ToolCall, ToolInfo

Key = tuple[str, tuple[tuple[str, Any], ...]]

#: authority fields that name who a sink reaches (the rest name what it acts on)
_RECIPIENT_FIELDS = frozenset({"recipients", "cc", "bcc", "recipient", "participants",
                               "email", "user_email", "user"})


def tool_infos(functions: Mapping[str, Any]) -> dict[str, ToolInfo]:
    """AgentDojo's functions as a deployment declares them: sinks are high-risk and their
    authority fields carry a recipient or target role (tools.SINKS)."""
    out = {}
    for name, f in functions.items():
        schema = f.parameters.model_json_schema()
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        auth = SINKS[name].authority if name in SINKS else ()
        order = [*[p for p in auth if p in props], *[p for p in props if p not in auth]]
        params = []
        for p in order:
            role = ("recipient" if p in _RECIPIENT_FIELDS else "target") if p in auth \
                else "content"
            typ = props[p].get("type", "string")
            params.append(Param(p, "list" if typ == "array" else str(typ), role,
                                p in required, str(props[p].get("description", ""))))
        out[name] = ToolInfo(name, str(f.description), "side_effect" if name in SINKS
                             else "read", name in SINKS, tuple(params))
    return out


class SinkLedger:
    """The sink-level ledger: a call matches an entry iff its authority key is the entry's
    (eq. 9 at authority level); Expand is ``action`` for a tainted call no entry matches."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Sequence[Key]) -> None:
        self._keys = tuple(keys)

    @property
    def actions(self) -> frozenset[str]:
        return frozenset(k[0] for k in self._keys)

    def match(self, tool: str, args: Mapping[str, Any]) -> int | None:
        key = authority_key(tool, args)
        return self._keys.index(key) if key in self._keys else None

    def expand(self, call: ToolCall, matched: int | None) -> list[str]:
        # an exact authority match leaves no field for a tainted value to expand
        return [] if matched is not None or not call.tainted else ["action"]


class SinkBoundary:
    """The tools the user task's ground truth uses and the authority values it gives each."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Sequence[Key]) -> None:
        self._keys = tuple(keys)

    @property
    def allowed_tools(self) -> frozenset[str]:
        return frozenset(k[0] for k in self._keys)

    def constrains(self, tool: str, field: str) -> bool:
        return tool in SINKS and field in SINKS[tool].authority

    def disallowed(self, tool: str, field: str, value: Any) -> list[Any]:
        i = SINKS[tool].authority.index(field)
        ok: set[Any] = set()
        for k in self._keys:
            if k[0] == tool:
                v = k[1][i][1]
                ok |= set(v) if isinstance(v, tuple) else {v}
        value = norm(value)  # as the authority key holds it (tools.norm)
        seen = value if isinstance(value, tuple) else (value,)
        return [v for v in seen if v is not None and v not in ok]

    def max_visibility(self, tool: str) -> str | None:
        return None


def knowledge_of(ledger: Sequence[Key]) -> Knowledge:
    return Knowledge(ledger=SinkLedger(ledger), boundary=SinkBoundary(ledger),
                     data_labels=NoSecrets())


class NoSecrets:
    """AgentDojo has no synthetic secrets: Leak(q) is never set (§6.4)."""

    __slots__ = ()

    def leak(self, tool: str, args: Mapping[str, Any]) -> bool:
        return False
