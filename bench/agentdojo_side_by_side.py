"""AgentDojo's own runner against the project's adapter, same suite subset, same served model,
same server (issue 36, "Side by side with AgentDojo"; target: the adapter's rollouts per hour
at least 5x AgentDojo's runner, with overlapping utility and attack-success intervals).

The subset: the first ``--user-tasks`` injectable user tasks of ``--suite`` (AgentDojo's
order) and its first ``--injection-tasks`` injection tasks, attack ``direct``: one clean
episode per user task and one attacked episode per (user task, injection task) pair, in both
arms (AgentDojo's ``benchmark_suite_with_injections`` would also run every injection task as
a user task; those episodes are left out of both arms).

* AgentDojo: its own per-task loops (``benchmark.run_task_without_injection_tasks`` and
  ``run_task_with_injection_tasks``, no log folder), one worker, its tool-calling pipeline
  (system message, query, ``OpenAILLM`` with native tool calls, tool-execution loop) on an
  ``openai.OpenAI`` client for the server. AgentDojo's ``OpenAILLM`` sends only the
  temperature; the client is wrapped to add the same ``max_tokens`` and ``top_p`` the adapter
  sends, and a seed derived from the request's messages (the server honours seeds), so both
  arms decode alike.
* the adapter: ``adapters.agentdojo.run.run_adapter`` (the gateway, defense ``none``, the trace
  recorder, AgentDojo's checkers), the served model through ``backend=openai`` against the same
  server, with ``--workers`` episodes in flight (each episode's model call is one request; the
  server's engine batches the requests of the episodes in flight). The AgentDojo-native rerun
  the study makes for §6.4 parity is off (``native=False``): this arm is the adapter alone.

The arms run one after the other on one server, in the order adapter, AgentDojo, adapter, so
that a drift in the machine's load during the long AgentDojo arm shows as a difference between
the two adapter passes (this machine is shared); each pass starts with an untimed warm-up
episode, so the server's prefix cache is warm for all. Rollouts per hour are episodes over the
pass's wall time; the ratio uses both adapter passes together (their episodes over their
summed wall time) and is also printed against each. Utility (clean and under attack) and attack success (the
injection task's ``security`` check) get 95% Wilson score intervals: paper 000 gives no
interval for a single proportion (its intervals are bootstraps over paired rollouts, which a
two-implementation comparison does not have); Wilson's is chosen as it keeps its coverage at
the small n of a benchmark subset and never leaves [0, 1]. A provider error is an error in
both arms, counted and printed, never an outcome.

Run against a server started by ``bench/local_server.py`` (``make bench-agentdojo``), or any
OpenAI-compatible server serving a model with tool calls:

    python bench/agentdojo_side_by_side.py [--base-url URL] [--model NAME] [--suite banking]
        [--user-tasks 8] [--injection-tasks 2] [--workers 24] [--temperature 0.7]
        [--top-p 0.95] [--max-tokens 256] [--seed 1]

Prints figures only; no assertion on time.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

def wilson(k: int, n: int) -> tuple[float, float, float] | None:
    """Share k/n and its 95% Wilson score interval (scipy's ``binomtest``); None for n = 0."""
    if n == 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return k / n, float(ci.low), float(ci.high)


def overlap(a: tuple[float, float, float] | None, b: tuple[float, float, float] | None) -> bool:
    return a is not None and b is not None and a[1] <= b[2] and b[1] <= a[2]


class DecodingClient:
    """An ``openai.OpenAI`` client whose ``chat.completions.create`` adds ``max_tokens``,
    ``top_p`` and a seed (sha256 of the request's messages) where AgentDojo's element sends
    none, and counts the calls and their tokens."""

    def __init__(self, client: Any, max_tokens: int, top_p: float) -> None:
        self._client, self.max_tokens, self.top_p = client, max_tokens, top_p
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.chat = self.completions = self  # client.chat.completions.create

    def create(self, **kw: Any) -> Any:
        kw.setdefault("max_tokens", self.max_tokens)
        kw.setdefault("top_p", self.top_p)
        body = json.dumps(kw["messages"], sort_keys=True, default=str).encode()
        kw.setdefault("seed", int.from_bytes(hashlib.sha256(body).digest()[:4], "big") >> 1)
        out = self._client.chat.completions.create(**kw)
        self.calls += 1
        if out.usage is not None:
            self.prompt_tokens += out.usage.prompt_tokens
            self.completion_tokens += out.usage.completion_tokens
        return out


def subset(suite: str, n_users: int, n_inj: int) -> tuple[list[str], list[str]]:
    from containmentbench.adapters.agentdojo import tasks as T

    users = [u for u in T.sort_ids(T.suite(suite).user_tasks)
             if T.injection_candidates(suite, u)][:n_users]
    return users, T.sort_ids(T.suite(suite).injection_tasks)[:n_inj]


def run_agentdojo(args: argparse.Namespace, users: list[str], inj: list[str]) -> dict[str, Any]:
    """AgentDojo alone: its pipeline, its OpenAI provider, its per-task loops, one worker."""
    import openai
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
    from agentdojo.attacks.attack_registry import load_attack
    from agentdojo.benchmark import run_task_with_injection_tasks, run_task_without_injection_tasks
    from agentdojo.logging import Logger, NullLogger

    from containmentbench.adapters.agentdojo import tasks as T

    client = DecodingClient(openai.OpenAI(base_url=args.base_url, api_key="EMPTY",
                                          max_retries=0, timeout=600.0),
                            args.max_tokens, args.top_p)
    llm = OpenAILLM(client, args.model, temperature=args.temperature)  # type: ignore[arg-type]
    pipeline = AgentPipeline([SystemMessage(load_system_message(None)), InitQuery(), llm,
                              ToolsExecutionLoop([ToolsExecutor(), llm])])
    pipeline.name = f"local-{args.model}"
    suite = T.suite(args.suite)
    attack = load_attack("direct", suite, pipeline)
    clean: dict[str, bool] = {}
    util: dict[tuple[str, str], bool] = {}
    sec: dict[tuple[str, str], bool] = {}
    errors: list[str] = []

    class TraceFolder(NullLogger):
        """AgentDojo's runner writes each task's JSON trace under its logger's ``logdir`` (a
        ``NullLogger`` has none, and its ``TraceLogger`` then writes into the installed
        package's parent folders): a temporary folder, no console output."""

        def __enter__(self) -> TraceFolder:
            Logger.__enter__(self)  # onto the logger stack (NullLogger's own does not push)
            self.messages, self.logdir = [], tmp
            return self

        def __exit__(self, *exc: object) -> bool:
            return Logger.__exit__(self, *exc)

    tmp = tempfile.mkdtemp(prefix="agentdojo-side-by-side-")
    stack = contextlib.ExitStack()
    stack.enter_context(TraceFolder())
    stack.callback(shutil.rmtree, tmp, True)
    # warm-up: one clean episode (imports, the server's prefix cache), not timed
    run_task_without_injection_tasks(suite, pipeline, suite.get_user_task_by_id(users[0]),
                                     None, True)
    calls0 = client.calls
    tok0 = (client.prompt_tokens, client.completion_tokens)
    t0 = time.perf_counter()
    for u in users:
        ut = suite.get_user_task_by_id(u)
        try:
            clean[u] = bool(run_task_without_injection_tasks(suite, pipeline, ut, None, True)[0])
            ur, sr = run_task_with_injection_tasks(suite, pipeline, ut, attack, None, True, inj)
            util.update(ur)
            sec.update(sr)
        except Exception as exc:  # a provider error: counted, never an outcome
            errors.append(f"{u}: {type(exc).__name__}: {exc}"[:300])
        print(f"  agentdojo {u}: {time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    stack.close()
    return {"wall_s": wall, "episodes": len(clean) + len(util), "errors": errors,
            "clean_utility": list(clean.values()), "attacked_utility": list(util.values()),
            "attack_success": list(sec.values()), "calls": client.calls - calls0,
            "prompt_tokens": client.prompt_tokens - tok0[0],
            "completion_tokens": client.completion_tokens - tok0[1]}


def run_adapter(args: argparse.Namespace, users: list[str], inj: list[str]) -> dict[str, Any]:
    """The project's adapter: the gateway and ``backend=openai``, ``--workers`` episodes in
    flight on the same server."""
    from containmentbench.adapters.agentdojo import run as R
    from containmentbench.adapters.agentdojo.clock import frozen_clock
    from containmentbench.adapters.agentdojo.pipelines import served_backend
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig

    bc = BackendConfig(name="openai", model=args.model, top_p=args.top_p,
                       max_tokens=args.max_tokens, temperature=args.temperature,
                       tool_mode="native",
                       options={"base_url": args.base_url, "concurrency": args.workers,
                                "seed_supported": True, "timeout_s": 600})
    cfg = R.RunSettings("bench-side-by-side", args.suite, load_defense("none"), args.seed,
                        pipeline="backend", model=args.model, backend={"name": "openai"},
                        native=False, backend_config=bc,
                        decoding={"temperature": args.temperature,
                                  "max_tokens": args.max_tokens})
    served_backend(bc)  # built once, before the episodes' threads share it
    specs = R.specs_for(args.suite, users, inj, "direct")
    lock = threading.Lock()
    done = [0]

    def one(spec: Any) -> Any:
        out = R.run_adapter(cfg, spec)
        with lock:
            done[0] += 1
            if done[0] % max(1, len(specs) // 4) == 0:
                print(f"  adapter {done[0]}/{len(specs)}: {time.perf_counter() - t0:.0f} s",
                      flush=True)
        return out

    # One frozen clock around all episodes: each episode's own frozen_clock() enters and
    # leaves inside it, so whatever the threads' interleaving, every tool sees the frozen
    # clock until the outer one restores the real one.
    with frozen_clock():
        R.run_adapter(cfg, specs[0])  # warm-up, as in the AgentDojo arm; not timed
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            outs = list(pool.map(one, specs))
        wall = time.perf_counter() - t0
    ok = [o for o in outs if o.status == "ok"]
    calls = [e for o in outs for e in o.rec.events if e["kind"] == "model_call"]
    return {"wall_s": wall, "episodes": len(outs),
            "errors": [f"{o.spec.scenario_id}: {o.error}"[:300] for o in outs
                       if o.status != "ok"],
            "clean_utility": [bool(o.utility) for o in ok if o.spec.injection_id is None],
            "attacked_utility": [bool(o.utility) for o in ok if o.spec.injection_id],
            "attack_success": [bool(o.security) for o in ok if o.spec.injection_id],
            "calls": len(calls),
            "prompt_tokens": sum(e.get("call_prompt_tokens") or 0 for e in calls),
            "completion_tokens": sum(e.get("call_completion_tokens") or 0 for e in calls)}


def _fmt(ci: tuple[float, float, float] | None, n: int) -> str:
    return "n=0" if ci is None else f"{ci[0]:.2f} [{ci[1]:.2f}, {ci[2]:.2f}] (n={n})"


def report(ad: dict[str, Any], ours: dict[str, Any], again: dict[str, Any]) -> None:
    rate = {k: 3600 * r["episodes"] / r["wall_s"]
            for k, r in (("ad", ad), ("ours", ours), ("again", again))}
    both = 3600 * (ours["episodes"] + again["episodes"]) / (ours["wall_s"] + again["wall_s"])
    print(f"\n{'':24} {'AgentDojo runner':>30} {'project adapter':>30}")
    print(f"{'episodes':24} {ad['episodes']:>30} {ours['episodes']:>30}")
    print(f"{'provider errors':24} {len(ad['errors']):>30} {len(ours['errors']):>30}")
    print(f"{'wall time (s)':24} {ad['wall_s']:>30.1f} {ours['wall_s']:>30.1f}")
    print(f"{'rollouts per hour':24} {rate['ad']:>30.1f} {rate['ours']:>30.1f}")
    for key in ("calls", "prompt_tokens", "completion_tokens"):
        a, b = ad[key] / ad["wall_s"], ours[key] / ours["wall_s"]
        print(f"{key + ' per s':24} {a:>30.2f} {b:>30.2f}")
    agree = []
    for key in ("clean_utility", "attacked_utility", "attack_success"):
        ca = wilson(sum(ad[key]), len(ad[key]))
        cb = wilson(sum(ours[key]), len(ours[key]))
        agree.append(overlap(ca, cb))
        print(f"{key:24} {_fmt(ca, len(ad[key])):>30} {_fmt(cb, len(ours[key])):>30}")
    print(f"adapter, second pass (after the AgentDojo arm): {again['wall_s']:.1f} s, "
          f"{rate['again']:.1f} rollouts per hour; outcomes " + ", ".join(
              f"{key} {sum(again[key])}/{len(again[key])}"
              for key in ("clean_utility", "attacked_utility", "attack_success")))
    print(f"\nratio of rollouts per hour (adapter / AgentDojo): {both / rate['ad']:.2f}x "
          f"(both adapter passes; first {rate['ours'] / rate['ad']:.2f}x, second "
          f"{rate['again'] / rate['ad']:.2f}x; target >= 5x)")
    print(f"95% intervals overlap: {', '.join('yes' if a else 'NO' for a in agree)} "
          "(clean utility, utility under attack, attack success)")
    for name, r in (("AgentDojo", ad), ("adapter", ours), ("adapter, second pass", again)):
        for e in r["errors"][:3]:
            print(f"{name} error: {e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default=os.environ.get("CB_SERVER_URL"))
    ap.add_argument("--model", default=os.environ.get("CB_SERVED_MODEL"))
    ap.add_argument("--suite", default="banking")
    ap.add_argument("--user-tasks", type=int, default=8)
    ap.add_argument("--injection-tasks", type=int, default=2)
    ap.add_argument("--workers", type=int, default=24)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if not args.base_url or not args.model:
        print("agentdojo_side_by_side: no server: --base-url/--model or CB_SERVER_URL/"
              "CB_SERVED_MODEL (bench/local_server.py sets them)", file=sys.stderr)
        return 2
    users, inj = subset(args.suite, args.user_tasks, args.injection_tasks)
    print(f"suite {args.suite}: user tasks {users}; injection tasks {inj}; attack direct; "
          f"model {args.model} at {args.base_url}; temperature {args.temperature}, top_p "
          f"{args.top_p}, max_tokens {args.max_tokens}; adapter workers {args.workers}",
          flush=True)
    ours = run_adapter(args, users, inj)
    ad = run_agentdojo(args, users, inj)
    again = run_adapter(args, users, inj)
    report(ad, ours, again)
    return 0


if __name__ == "__main__":
    sys.exit(main())
