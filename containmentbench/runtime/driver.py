"""Episode drivers: many episodes in flight against one backend.

* Lockstep (``run_episodes``): at each tick every in-flight episode contributes its pending
  request and the backend receives all of them in one ``generate`` call. Simple, but each
  tick waits for the longest completion of the batch.
* Asynchronous (``arun_episodes``), for backends with ``agenerate`` (LAYOUT.md contract):
  every episode is an asyncio task that awaits its own completions, so an episode's next
  request joins the engine's running batch as soon as its previous completion returns.

Episodes never share state and every request carries its own seed, so both drivers give the
same completions for a deterministic backend; finished episodes are turned into trace rows
in the order of their specs, so a shard's files do not depend on completion order: same
inputs, byte-identical traces (tests/runtime/test_job.py runs sim both ways).
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from containmentbench.canonical import canonical_json, short_id
from containmentbench.defense.loading import Loaded
from containmentbench.models.base import Completion, GenerationRequest, ModelBackend
from containmentbench.parser.modes import recorded_version
from containmentbench.runtime.episode import Episode, RolloutSpec, RuntimeConfig
from containmentbench.scenarios.model import Scenario
from containmentbench.trace.io import to_table
from containmentbench.trace.schema import EVENTS

if TYPE_CHECKING:
    import asyncio


def rollout_id(study: str, model: str, defense: str, seed: int, scenario_id: str) -> str:
    return "r-" + short_id(study, model, defense, seed, scenario_id, n=16)


@dataclass(frozen=True, slots=True)
class ShardContext:
    study: str
    model: str
    backend: str
    defense: str
    seed: int
    agent_profile: str | None


def _rollout_row(ep: Episode, ctx: ShardContext, defense: Loaded,
                 seed_supported: bool) -> dict[str, Any]:
    s = ep.s
    c = ep.counts
    seed_record = {"scenario": {"id": s.id, "seed": ctx.seed}, "runner": ctx.seed,
                   "provider": {"supported": seed_supported,
                                "per_request": "stable_int(req, scenario, model, seed, "
                                               "agent instance, step)"},
                   "trace": ctx.seed}
    return {
        "rollout_id": ep.spec.rollout_id, "study": ctx.study, "suite": s.suite,
        "scenario_id": s.id, "scenario_hash": s.hash, "cluster_id": s.cluster_id,
        "family": s.family, "stage": s.stage, "domain": s.domain, "topology": s.topology,
        "memory_mode": s.memory_mode, "carrier": s.carrier, "attack_goal": s.attack_goal,
        "model": ctx.model, "backend": ctx.backend, "agent_profile": ctx.agent_profile,
        "defense": ctx.defense, "method_version": defense.method_version,
        "policy_hash": defense.policy_hash, "parser_version": recorded_version(ep.cfg.parser),
        "seed": ctx.seed, "provider_seed_supported": seed_supported,
        "seed_record": canonical_json(seed_record), "status": ep.status, "error": ep.error,
        "n_events": len(ep.rec.events), "n_model_calls": c["model_calls"],
        "n_proposals": c["proposals"], "n_commits": c["commits"], "n_blocked": c["blocked"],
        "n_confirm": c["confirm"], "n_invalid_tool": c["invalid_tool"],
        "n_parse_error": c["parse_error"], "n_truncated": c["truncated"],
        "n_repeated_calls": c["repeated_calls"], "n_prefilled": c["prefilled"],
        "decoding": ep.cfg.decoding(), "tool_mode": ep.cfg.tool_mode,
        "tools_offered": ep.cfg.tools_offered,
        "completion_digest": ep.said.hexdigest(),
        "prompt_tokens": ep.tokens[0],
        "completion_tokens": ep.tokens[1], "env_diff": canonical_json(ep.env_diff()),
        "final_answer": ep.final_answer, "defense_code": defense.code,
        "defense_model_calls": ep.defense_tokens[0],
        "defense_prompt_tokens": ep.defense_tokens[1],
        "defense_completion_tokens": ep.defense_tokens[2],
    }


def _clock(s: float) -> str:
    m, sec = divmod(round(s), 60)
    return f"{m // 60}:{m % 60:02d}:{sec:02d}" if m >= 60 else f"{m:02d}:{sec:02d}"


class Mirror:
    """A job's progress on a second stream, the terminal of the Snakemake run (rule
    ``rollout`` passes it as ``--progress-fd 3 3>&2``: the job's own log keeps every line).
    One line when the job starts, then at most every ``CB_PROGRESS_INTERVAL`` seconds
    (default 30), then one at the end, each with done/total, rate and ETA, summed over
    every shard of the job."""

    def __init__(self, total: int, label: str, stream: Any, every: float | None = None
                 ) -> None:
        import os

        self.total, self.label, self.stream = total, label, stream
        self.every = float(every if every is not None
                           else os.environ.get("CB_PROGRESS_INTERVAL", "30"))
        self.t0 = time.perf_counter()
        self.last = -1e18
        self.done = 0
        self.line(force=True)

    def add(self, done: int) -> None:
        self.done += done
        self.line(force=self.done >= self.total)

    def line(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self.last < self.every:
            return
        self.last = now
        el = max(now - self.t0, 1e-9)
        eta = (f", ETA {_clock((self.total - self.done) * el / self.done)}"
               if 0 < self.done < self.total else "")
        try:
            print(f"[{self.label}] {self.done}/{self.total} rollouts "
                  f"({100 * self.done / max(self.total, 1):.0f}%), "
                  f"{self.done / el:.1f}/s, elapsed {_clock(el)}{eta}", file=self.stream,
                  flush=True)
        except (OSError, ValueError):
            self.stream = None  # the terminal went away: the job's log still has every line
            self.every = float("inf")


class Progress:
    """Episodes done and actions per second on stderr (at most every ``every`` seconds);
    the episodes done also go to the job's ``Mirror`` when it has one."""

    def __init__(self, total: int, label: str, every: float = 2.0,
                 stream: Any = sys.stderr, mirror: Mirror | None = None) -> None:
        self.total, self.label, self.every, self.stream = total, label, every, stream
        self.t0 = self.last = time.perf_counter()
        self.done = 0
        self.actions = 0
        self.mirror = mirror

    def update(self, done: int, actions: int, force: bool = False) -> None:
        if self.mirror is not None and done > self.done:
            self.mirror.add(done - self.done)
        self.done, self.actions = done, actions
        now = time.perf_counter()
        if force or now - self.last >= self.every:
            el = max(now - self.t0, 1e-9)
            eta = (f", ETA {_clock((self.total - done) * el / done)}"
                   if 0 < done < self.total else "")
            print(f"[{self.label}] {done}/{self.total} episodes, {done / el:.2f} episodes/s, "
                  f"{actions / el:,.0f} actions/s, elapsed {_clock(el)}{eta}",
                  file=self.stream, flush=True)
            self.last = now


def new_episode(s: Scenario, defense: Loaded, ctx: ShardContext, cfg: RuntimeConfig,
                backend: Any = None) -> Episode:
    """One rollout; a defense's own model calls (``ask``) go to ``backend``, one at a time."""
    spec = RolloutSpec(rollout_id(ctx.study, ctx.model, ctx.defense, ctx.seed, s.id),
                       ctx.study, ctx.model, ctx.backend, ctx.defense, ctx.seed,
                       ctx.agent_profile)
    ask = None if backend is None else (lambda req: backend.generate([req])[0])
    return Episode(s, defense.layers, spec, cfg, ask)


def drive_lockstep(makers: Sequence[Callable[[], Episode]], backend: ModelBackend,
                   window: int, progress: Progress | None,
                   on_done: Callable[[int, Episode, float, float], None]) -> None:
    """The lockstep loop over episodes built lazily by ``makers`` (of one shard or of every
    shard of a job): at most ``window`` in flight, one ``generate`` call per tick over all
    their pending requests; ``on_done(i, episode, wall_s, model_s)`` as each one finishes."""
    n = len(makers)
    model_s = [0.0] * n
    started = [0.0] * n
    nxt = 0
    active: list[tuple[int, Episode]] = []
    done = actions = 0
    while nxt < n or active:
        while nxt < n and len(active) < window:
            started[nxt] = time.perf_counter()
            active.append((nxt, makers[nxt]()))
            nxt += 1
        reqs = [ep.request() for _, ep in active]
        t = time.perf_counter()
        comps = backend.generate(reqs)  # one call per tick over all pending requests
        share = (time.perf_counter() - t) / max(len(reqs), 1)
        still = []
        for (i, ep), comp in zip(active, comps):
            model_s[i] += share
            ep.feed(comp)
            actions += 1
            if ep.finished:
                done += 1
                on_done(i, ep, time.perf_counter() - started[i], model_s[i])
            else:
                still.append((i, ep))
        active = still
        if progress is not None:
            progress.update(done, actions)
    if progress is not None:
        progress.update(done, actions, force=True)


def run_episodes(scenarios: Sequence[Scenario], defense: Loaded, backend: ModelBackend,
                 ctx: ShardContext, cfg: RuntimeConfig, window: int = 512,
                 progress: Progress | None = None,
                 on_done: Callable[[int, Episode], None] | None = None
                 ) -> tuple[list[Episode | None], list[float], list[float]]:
    """Run every scenario once; returns finished episodes in input order with wall and
    model seconds per episode."""
    n = len(scenarios)
    out: list[Episode | None] = [None] * n
    wall = [0.0] * n
    model_s = [0.0] * n

    def finished(i: int, ep: Episode, w: float, m: float) -> None:
        out[i], wall[i], model_s[i] = ep, w, m
        if on_done is not None:
            on_done(i, ep)

    makers = [lambda s=s: new_episode(s, defense, ctx, cfg, backend) for s in scenarios]
    drive_lockstep(makers, backend, window, progress, finished)
    return out, wall, model_s


class AsyncAdapter:
    """``agenerate`` over a backend's ``generate([request])`` (each call runs in a worker
    thread): gives any backend the asynchronous driver, e.g. to check that ``sim`` traces
    are byte-identical under it."""

    def __init__(self, backend: ModelBackend) -> None:
        self.inner = backend
        self.name = backend.name
        self.seed_supported = getattr(backend, "seed_supported", False)

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        return self.inner.generate(requests)

    async def agenerate(self, request: GenerationRequest) -> Completion:
        import asyncio

        return (await asyncio.to_thread(self.inner.generate, [request]))[0]

    def close(self) -> None:
        self.inner.close()


async def arun_episodes(scenarios: Sequence[Scenario], defense: Loaded, backend: Any,
                        ctx: ShardContext, cfg: RuntimeConfig, window: asyncio.Semaphore,
                        progress: Progress | None = None
                        ) -> tuple[list[Episode | None], list[float], list[float]]:
    """Every scenario as an asyncio task awaiting ``backend.agenerate`` per step; at most
    ``window`` episodes (a semaphore shared by every shard of a job) are in flight. Returns
    finished episodes in input order, with wall and model seconds per episode."""
    import asyncio

    n = len(scenarios)
    out: list[Episode | None] = [None] * n
    wall = [0.0] * n
    model_s = [0.0] * n
    tally = {"done": 0, "actions": 0}

    async def one(i: int, s: Scenario) -> None:
        async with window:
            t0 = time.perf_counter()
            ep = new_episode(s, defense, ctx, cfg, backend)
            while not ep.finished:
                req = ep.request()
                t = time.perf_counter()
                comp = await backend.agenerate(req)
                model_s[i] += time.perf_counter() - t
                ep.feed(comp)
                tally["actions"] += 1
            wall[i] = time.perf_counter() - t0
            out[i] = ep
            tally["done"] += 1
            if progress is not None:
                progress.update(tally["done"], tally["actions"])

    await asyncio.gather(*(one(i, s) for i, s in enumerate(scenarios)))
    return out, wall, model_s


def shard_tables(episodes: Sequence[Episode], ctx: ShardContext, defense: Loaded,
                 seed_supported: bool, wall: Sequence[float], model_s: Sequence[float],
                 job: str = "", job_load_s: float = 0.0) -> dict[str, pa.Table]:
    """The ``rollouts``, ``events``, ``edges`` and ``timings`` tables of a shard."""
    names = EVENTS.names
    ev_cols: dict[str, list[Any]] = {n: [] for n in names}
    ed_cols: dict[str, list[Any]] = {"rollout_id": [], "src": [], "dst": [], "kind": [],
                                     "propagates_taint": []}
    rows = []
    for ep in episodes:
        rows.append(_rollout_row(ep, ctx, defense, seed_supported))
        for k, v in ep.rec.columns(names).items():
            ev_cols[k].extend(v)
        for k, v in ep.rec.edge_columns().items():
            ed_cols[k].extend(v)
    ro_cols = {k: [r[k] for r in rows] for k in rows[0]} if rows else {}
    host = socket.gethostname()
    timings = {"rollout_id": [r["rollout_id"] for r in rows], "wall_s": list(wall),
               "model_s": list(model_s), "host": [host] * len(rows),
               "job": [job] * len(rows), "job_load_s": [float(job_load_s)] * len(rows),
               "call_latency_s": [list(getattr(ep, "latencies", [])) for ep in episodes],
               "defense_hook_s": [ep.host.hook_seconds for ep in episodes],
               "defense_layers": [canonical_json(ep.host.cost_record()) for ep in episodes]}
    from containmentbench.trace.schema import ROLLOUTS
    if not rows:
        ro_cols = {f.name: [] for f in ROLLOUTS}
    return {"rollouts": to_table("rollouts", ro_cols), "events": to_table("events", ev_cols),
            "edges": to_table("edges", ed_cols), "timings": to_table("timings", timings)}
