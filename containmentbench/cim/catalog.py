"""The Table 4 parameters and the tool catalog of the synthetic generator (paper 002 §7.1).

Shared by the generator (generator.py), its kernel (synth.py) and the Arrow column builder
(columns.py), which import it in one direction only: generator -> synth -> columns ->
catalog (house issue 27: no import circles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from containmentbench.errors import BenchError

WORKFLOWS = ("W1", "W2", "W3")


@dataclass(frozen=True, slots=True)
class Tool:
    """One catalog tool: its resource class and universe, and four tool-native operations
    in the order (read, search, write, distribute) with their Tier-1 verbs (App. B.2)."""

    name: str
    resource_class: str
    universe: str
    ops: tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]]
    logs_session: bool


CATALOG: tuple[Tool, ...] = (
    Tool("drive", "file", "files", (("files.get", "read"), ("files.list", "search"),
                                    ("files.update", "write"),
                                    ("permissions.create", "share")), False),
    Tool("docs", "document", "files", (("documents.get", "read"), ("documents.search", "search"),
                                       ("documents.batchUpdate", "write"),
                                       ("documents.createLink", "share")), False),
    Tool("slack", "channel", "channels", (("conversations.history", "read"),
                                          ("search.messages", "search"),
                                          ("chat.update", "write"),
                                          ("chat.postMessage", "share")), True),
    Tool("github", "repository", "repos", (("repos.getContent", "read"),
                                           ("search.code", "search"),
                                           ("repos.createOrUpdateFileContents", "write"),
                                           ("actions.createWorkflowDispatch", "invoke")), True),
    Tool("jira", "ticket", "tickets", (("issue.get", "read"), ("issue.search", "search"),
                                       ("issue.edit", "write"), ("issue.addWatcher", "invite")),
         True),
    Tool("crm", "crm_record", "records", (("contacts.get", "read"), ("contacts.search", "search"),
                                          ("contacts.update", "write"),
                                          ("contacts.export", "share")), False),
    Tool("email", "message", "mailboxes", (("messages.get", "read"), ("messages.list", "search"),
                                           ("drafts.create", "write"),
                                           ("messages.send", "share")), False),
)


@dataclass(frozen=True, slots=True)
class GenParams:
    workflows: tuple[str, ...] = WORKFLOWS
    days: int = 1
    users: int = 10_000                    # U
    agents: int = 100_000                  # A
    tools_min: int = 3                     # K in [3, 7]
    tools_max: int = 7
    files: int = 1_000_000                 # resources: 1e6 files, 1e3 repos, 1e2 channels
    repos: int = 1_000
    channels: int = 100
    tickets: int = 100_000                 # not in Table 4: tickets and CRM records
    records: int = 100_000
    delegations_per_day: int = 200_000     # D_day in [2e5, 2e6]
    events_min: int = 20                   # E_d in [20, 500]
    events_max: int = 500
    loops_w1: int = 50                     # loops per workflow 50/60/75
    loops_w2: int = 60
    loops_w3: int = 75
    overlap_rate: float = 0.25             # [10%, 40%]
    spawn_fanout: float = 3.0              # mean children [2, 5] (W2)
    spawn_depth: int = 2                   # depth [1, 4] (W2)
    retry_rate: float = 3.0                # mean retries per step [0, 10] (W3)
    backtrack_rate: float = 0.1            # W3 restarts per step
    coverage: float = 0.8                  # synthetic coverage
    bypass: float = 0.05                   # synthetic bypass probability
    trace_coverage_min: float = 0.6        # 60-80% of events carry trace/span ids, by tool
    trace_coverage_max: float = 0.8
    trace_propagation: float = 0.3         # W2 child continuing its parent's trace
    unbound_rate: float = 0.001
    hint_conflict_rate: float = 0.001
    external_share_rate: float = 0.05
    drift_rate: float = 0.05               # injected late high-impact expansion (§5.4)
    approval_rate: float = 0.5             # ... followed by an approval event
    seed: int = 0
    chunk_events: int = 1_000_000
    row_group_rows: int = 131_072

    def loops(self, workflow: str) -> int:
        return {"W1": self.loops_w1, "W2": self.loops_w2, "W3": self.loops_w3}[workflow]

    def validate(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise BenchError(f"{why} (got {getattr(self, name)!r})", field=name)
        bad = [w for w in self.workflows if w not in WORKFLOWS]
        need(not bad and bool(self.workflows), "workflows", "workflows must be W1, W2, W3")
        for name in ("days", "users", "agents", "files", "repos", "channels", "tickets",
                     "records", "delegations_per_day", "chunk_events", "row_group_rows"):
            need(getattr(self, name) >= 1, name, "must be >= 1")
        need(1 <= self.tools_min <= self.tools_max <= len(CATALOG), "tools_max",
             f"need 1 <= tools_min <= tools_max <= {len(CATALOG)}")
        need(1 <= self.events_min <= self.events_max, "events_max",
             "need 1 <= events_min <= events_max")
        need(1 <= self.spawn_depth <= 8, "spawn_depth", "must lie in [1, 8]")
        for name in ("spawn_fanout", "retry_rate"):
            need(getattr(self, name) >= 0, name, "must be >= 0")
        for name in ("overlap_rate", "backtrack_rate", "coverage", "bypass",
                     "trace_coverage_min", "trace_coverage_max", "trace_propagation",
                     "unbound_rate", "hint_conflict_rate", "external_share_rate", "drift_rate",
                     "approval_rate"):
            need(0.0 <= getattr(self, name) <= 1.0, name, "must lie in [0, 1]")
        need(self.bypass <= self.coverage, "bypass", "bypass must not exceed coverage")
        need(self.trace_coverage_min <= self.trace_coverage_max, "trace_coverage_max",
             "trace_coverage_min must not exceed trace_coverage_max")
        need(self.agents >= self.users, "agents", "need at least one agent per user")


def tree_size(p: GenParams) -> float:
    """E[delegations per W2 tree]: depth ~ U{1..spawn_depth}, Poisson(fanout) children."""
    sizes = [sum(p.spawn_fanout ** level for level in range(d + 1))
             for d in range(1, p.spawn_depth + 1)]
    return float(np.mean(sizes))


@dataclass(frozen=True, slots=True)
class ChunkSpec:
    workflow: str
    day: int
    bucket: int
    user_lo: int
    user_hi: int
