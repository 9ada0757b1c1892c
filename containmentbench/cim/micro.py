"""The micro-deployment of paper 002 §7.1 (Table 4 "micro" column): W1-W3 workflows run
through our real runtime and gateway, CIM rows emitted live at capture time, coverage
accounted against a declared tool inventory, and the gateway's added latency timed per call.

Workflows (§7.2.1) as scenarios of the sandbox (the clean stage of ``full_main`` gives the
worlds; each rollout gets its own principal and a plan of the workflow's shape, which the
``sim`` agent follows and a real model is given as its task):

* **W1** cross-system, causally disconnected subtasks: a single agent reads across many
  tools (mail, documents, CRM, calendar, contacts, messages, memory), then writes a synthesis
  (task record) and sends it to its allowed recipient;
* **W2** multi-agent composition: supervisor-worker and peer-chain worlds, each reading agent
  gathering more material before it delegates or hands off (re-delegation edges);
* **W3** trial-and-adapt: each step first fails on a wrong id (Poisson(``retry_mean``)
  attempts, Table 4 "mean retries/step") before it succeeds, with backtracks to earlier steps.

A *run* is ``users_per_run`` principals acting at once (each with probability
``overlap_rate`` running a second delegation concurrently, Table 4 "overlap"), driven in
lockstep, all tapped into one live emitter (live.py) with a wall clock. The CIM rows of a run
are one events file, so the baselines see one run per file as with generated stores.

The deployment model (App. C.5): the runtime executes and binds every call; the declared
inventory (coverage.py) says which tools the gateway mediates, and a seeded ``bypass`` share
of calls on mediated tools goes around it. Rows of calls the gateway would not see are kept
only as evaluation ground truth (``capture`` = uncovered / bypass, ``covered`` false,
delegation fields null), as the generator does.

Latency (Table 6, §7.4 "additional processing time per tool invocation introduced by
delegation binding and event emission"): per tool call, the time of ``Gateway.bind`` (and any
``mint`` it triggers) plus every live hand-over until the agent's next call (projection,
batching, flushes to the in-memory sink). Calls the gateway would not see are left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from containmentbench.canonical import derive_rng, stable_int
from containmentbench.cim.coverage import Inventory
from containmentbench.cim.live import LiveEmitter
from containmentbench.errors import BenchError
from containmentbench.gateway import Gateway

WORKFLOWS = ("W1", "W2", "W3")
POOL = {"W1": ("single",), "W2": ("supervisor_worker", "peer_chain"), "W3": ("single",)}
TARGET_READS = {"read_email": ("email_id", "emails", "id"),
                "read_document": ("doc_id", "documents", "id"),
                "crm_lookup": ("contact_id", "crm", "contact_id")}


@dataclass(frozen=True, slots=True)
class MicroParams:
    workflows: tuple[str, ...] = WORKFLOWS
    runs: int = 50                    # Table 4: 50 main runs per workflow (micro)
    users_per_run: int = 15            # sized for ~70k events at 50 runs (§7.1)
    overlap_rate: float = 0.25        # Table 4: 10-40% of users with >= 2 delegations
    reads_min: int = 6
    reads_max: int = 16
    retry_mean: float = 3.0           # W3 (Table 4: 0-10 retries per step)
    backtrack_rate: float = 0.1       # W3 restarts per step
    seed: int = 1
    suite: str = "full_main"
    stage: str = "clean"

    def check(self) -> None:
        bad = [w for w in self.workflows if w not in WORKFLOWS]
        if bad or not self.workflows:
            raise BenchError(f"unknown workflow '{bad[0] if bad else ''}' (W1, W2, W3)",
                             field="workflows")
        for name, lo in (("runs", 1), ("users_per_run", 1), ("reads_min", 1)):
            if getattr(self, name) < lo:
                raise BenchError(f"must be >= {lo}", field=name.replace("_", "-"))
        if self.reads_max < self.reads_min:
            raise BenchError("must be >= reads-min", field="reads-max")
        for name in ("overlap_rate", "backtrack_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise BenchError("must lie in [0, 1]", field=name.replace("_", "-"))
        if not 0 <= self.retry_mean <= 10:
            raise BenchError("must lie in [0, 10]", field="retry-mean")


# ------------------------------------------------------------------ workflow plans

def _reads(st: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every read the world supports, across its tools."""
    out: list[tuple[str, dict[str, Any]]] = []
    for tool, (arg, coll, key) in TARGET_READS.items():
        out += [(tool, {arg: x[key]}) for x in st[coll]]
    out += [("search_documents", {"query": d["title"].split()[0]}) for d in st["documents"]]
    out += [("search_email", {"query": e["subject"].split()[0]}) for e in st["emails"]
            if e["subject"].split()]
    out += [("lookup_contact", {"name": c["name"].split()[0]}) for c in st["contacts"]]
    out += [("list_calendar", {}), ("read_messages", {}), ("memory_list", {})]
    return out


def _step(agent: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"agent": agent, "tool": tool, "args": args, "session": 1}


def _synthesis(agent: str, st: dict[str, Any], auth: dict[str, Any]) -> list[dict[str, Any]]:
    to = (auth.get("allowed_recipients") or [st["principal"]["email"]])[0]
    return [_step(agent, "write_task_record", {"summary": "Synthesis of the material read."}),
            _step(agent, "send_email", {"to": to, "subject": "Summary",
                                        "body": "Summary of the material read."})]


def _w1(rec: dict[str, Any], rng: np.random.Generator, p: MicroParams) -> list[dict[str, Any]]:
    st, agent = rec["initial_state"], rec["agents"][0]["id"]
    pool = _reads(st)
    n = int(rng.integers(p.reads_min, p.reads_max + 1))
    picks = [pool[i] for i in rng.choice(len(pool), n, replace=n > len(pool))]
    return ([_step(agent, t, a) for t, a in picks] + _synthesis(agent, st, rec["authorization"])
            + [_step(agent, "final_answer", {"text": "Done."})])


def _w2(rec: dict[str, Any], rng: np.random.Generator, p: MicroParams) -> list[dict[str, Any]]:
    pool = _reads(rec["initial_state"])
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for s in rec["plans"]["benign"]:
        if s["agent"] not in seen:  # each agent gathers more material first
            seen.add(s["agent"])
            k = int(rng.integers(max(p.reads_min // 2, 1), max(p.reads_max // 2, 1) + 1))
            out += [_step(s["agent"], *pool[i]) for i in rng.choice(len(pool), k)]
        out.append(dict(s))
    return out


def _w3(rec: dict[str, Any], rng: np.random.Generator, p: MicroParams) -> list[dict[str, Any]]:
    st, agent = rec["initial_state"], rec["agents"][0]["id"]
    pool = [r for r in _reads(st) if r[0] in TARGET_READS]
    n = int(rng.integers(max(p.reads_min // 2, 1), max(p.reads_max // 2, 1) + 1))
    steps: list[tuple[str, dict[str, Any]]] = []
    out: list[dict[str, Any]] = []
    for j in range(n):
        tool, args = pool[int(rng.integers(len(pool)))]
        arg = TARGET_READS[tool][0]
        for k in range(min(int(rng.poisson(p.retry_mean)), 10)):
            out.append(_step(agent, tool, {arg: f"{args[arg]}-x{j}.{k}"}))  # fails: no such id
        out.append(_step(agent, tool, args))
        steps.append((tool, args))
        if j and rng.random() < p.backtrack_rate:  # backtrack: redo an earlier step
            out.append(_step(agent, *steps[int(rng.integers(len(steps) - 1))]))
    return out + _synthesis(agent, st, rec["authorization"]) + [
        _step(agent, "final_answer", {"text": "Done."})]


PLANS = {"W1": _w1, "W2": _w2, "W3": _w3}


def run_scenarios(pool: list[Any], wf: str, run: int, p: MicroParams) -> list[Any]:
    """The delegations of one run: one per user, a second one for overlapping users."""
    from containmentbench.scenarios.model import Scenario

    rng = derive_rng("cim-micro", p.seed, wf, run)
    out = []
    for u in range(p.users_per_run):
        user = f"user-micro-{wf.lower()}-{run:03d}-{u:02d}"
        for k in range(1 + int(rng.random() < p.overlap_rate)):
            base = pool[int(rng.integers(len(pool)))].record
            rec = {**base, "id": f"micro-{wf}-{run:03d}-{u:02d}-{k}", "family": f"micro-{wf}",
                   "initial_state": {**base["initial_state"], "principal": {
                       **base["initial_state"]["principal"], "user_id": user}}}
            plan = PLANS[wf](rec, rng, p)
            rec["plans"] = {"benign": plan, "attacker": plan, "attack": []}
            rec.pop("prefill", None)
            out.append(Scenario.from_dict(rec))
    return out


# ------------------------------------------------------------------ timing


@dataclass(slots=True)
class Meter:
    """Per tool call: gateway binding plus the live emission it causes (module docstring)."""

    open: dict[str, list[Any]] = field(default_factory=dict)   # rid -> [tool, call, ns]
    samples: list[tuple[str, str, str | None, int]] = field(default_factory=list)
    other_ns: int = 0

    def call(self, rid: str, tool: str, ns: int) -> None:
        self.close(rid)
        self.open[rid] = [tool, None, ns]

    def add(self, rid: str, ns: int) -> None:
        if rid in self.open:
            self.open[rid][2] += ns
        else:
            self.other_ns += ns

    def tag(self, rid: str, call_id: str | None) -> None:
        if rid in self.open and self.open[rid][1] is None:
            self.open[rid][1] = call_id

    def close(self, rid: str | None = None) -> None:
        for r in ([rid] if rid is not None else list(self.open)):
            if r in self.open:
                tool, call, ns = self.open.pop(r)
                self.samples.append((r, tool, call, ns))


def timed_gateway(meter: Meter) -> type[Gateway]:
    class _Timed(Gateway):
        __slots__ = ()

        def bind(self, delegation_id: str | None, agent_id: str, agent_instance: str,
                 tool: str, args: dict[str, Any], hints: dict[str, Any] | None = None,
                 principal_id: str | None = None) -> dict[str, Any]:
            t0 = time.perf_counter_ns()
            out = Gateway.bind(self, delegation_id, agent_id, agent_instance, tool, args,
                               hints, principal_id)
            meter.call(self.rollout_id, tool, time.perf_counter_ns() - t0)
            return out

        def mint(self, *a: Any, **k: Any) -> Any:
            t0 = time.perf_counter_ns()
            d = Gateway.mint(self, *a, **k)
            meter.add(self.rollout_id, time.perf_counter_ns() - t0)
            return d

    return _Timed


class TaggingEmitter(LiveEmitter):
    """The live emitter, telling the meter which call id the open sample belongs to."""

    def __init__(self, meter: Meter, *a: Any, **k: Any) -> None:
        super().__init__(*a, **k)
        self.meter = meter

    def observe(self, event: dict[str, Any]) -> None:
        if event["kind"] == "proposal":
            self.meter.tag(event["rollout_id"], event.get("call_id"))
        super().observe(event)


# ------------------------------------------------------------------ capture model

def bypassed(seed: int, rid: str, call_id: str | None, share: float) -> bool:
    return call_id is not None and share > 0 and \
        stable_int("cim-micro-bypass", seed, rid, call_id) / 2.0**64 < share


def capture_model(table: pa.Table, inv: Inventory, seed: int) -> pa.Table:
    """Mark rows the deployment's gateway would not see (module docstring)."""
    import polars as pl

    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    fam, op = df["tool_name"].to_list(), df["tool_operation"].to_list()
    rid, call = df["workflow_id"].to_list(), df["call_id"].to_list()
    cap = []
    for f, o, r, c in zip(fam, op, rid, call):
        med = inv.is_mediated(f, o) if o is not None else True
        if med is False:
            cap.append("uncovered")
        elif o is not None and bypassed(seed, r, c, inv.bypass):
            cap.append("bypass")
        else:
            cap.append("gateway")
    gw = pl.Series(cap) == "gateway"
    null = pl.lit(None, pl.String)
    df = df.with_columns(pl.Series("capture", cap), gw.alias("covered")).with_columns(
        *(pl.when(pl.col("covered")).then(pl.col(c)).otherwise(null).alias(c)
          for c in ("delegation_id", "delegation_parent_id", "principal_user_id")),
        pl.when(pl.col("covered")).then(pl.col("delegation_binding"))
        .otherwise(pl.lit("unbound")).alias("delegation_binding"),
        pl.when(pl.col("covered")).then(pl.col("integrity"))
        .otherwise(pl.lit(None, pl.List(pl.String))).alias("integrity"))
    return df.to_arrow().cast(table.schema)


def kept_samples(samples: Iterable[tuple[str, str, str | None, int]], inv: Inventory,
                 seed: int) -> list[int]:
    """Latency samples of calls the gateway sees (mediated tool, not bypassed)."""
    from containmentbench.cim.project import TOOL_FAMILY

    return [ns for rid, tool, call, ns in samples
            if inv.is_mediated(TOOL_FAMILY.get(tool, tool), tool) is not False
            and not bypassed(seed, rid, call, inv.bypass)]
