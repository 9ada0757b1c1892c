"""Throughput as a result: rollouts per hour, model calls per second, prompt and output tokens
per second and the prefix-cache hit rate, per rollout job and per study (issue 36, item 4).

What is counted (:class:`Tally`, filled by ``runtime/job.py`` around the job's backend):

* ``rollouts``: the episodes the job ran (skipped, finished shards are not run, not counted);
* ``model_calls``: every call the job's backend answered without a provider error, the
  agents' and the defenses' own (a judge, a tool filter); ``call_errors`` the others;
* ``prompt_tokens``, ``output_tokens``: the backend's own usage of those calls (vLLM's token
  ids, an HTTP server's ``usage``). The simulated agent has no tokenizer (its counts are
  text length / 4, and no prompt), and a server that sends no ``usage`` reports none: their
  token rates are null, never an estimate passed off as a count;
* ``cached_tokens`` over ``cache_prompt_tokens``: the prompt tokens the engine served from
  its prefix cache, over the prompt tokens of the calls for which it said (vLLM's
  ``num_cached_tokens`` per request, in process; ``usage.prompt_tokens_details.
  cached_tokens`` over HTTP, which vLLM's server sends with
  ``--enable-prompt-tokens-details``). That is the hit rate vLLM's own metrics report
  (``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``, both in tokens). A server
  whose replies do not say is asked for those counters at ``<root>/metrics`` (Prometheus text,
  vLLM's server) before and after the job: their change over the job
  (``server_cache_hits`` / ``server_cache_queries``; they count every client the server had
  meanwhile, and the record says so). Null, "none", where neither says (the simulated agent,
  HF, llama.cpp or Ollama without the field).
* ``run_s``: wall clock from the backend being ready to the job's last shard written (the
  engine load is the job record's ``load_s``, its share ``load_share``: not throughput).

Rates are counts / ``run_s`` (rollouts per hour: x 3600). A study's figures pool its jobs:
summed counts over summed ``run_s``, i.e. per job-second (jobs that ran side by side on
several devices finish the study sooner than that). Paper 000 reports no throughput; these
definitions are the project's.

Wall clock is not deterministic: the figures live in the job records
(``logs/rollout/<job>.json``, never hashed), in ``status``, in the job log's last line, in
the headline's footer (printed, not in ``headline.md``) and in ``tables/throughput.*``, which
``analyze`` lists under ``analysis.json``'s ``wall_clock``: hashed by ``freeze`` as they are,
never compared by ``reproduce`` or by the byte-identity checks (docs/results.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

#: backends without a tokenizer: their token counts are estimates, not usage
NO_USAGE_BACKENDS = ("sim", "scripted")
#: the counts of a record (summed over jobs for a study)
COUNTS = ("rollouts", "model_calls", "call_errors", "prompt_tokens", "output_tokens",
          "usage_calls", "cached_tokens", "cache_prompt_tokens", "server_cache_hits",
          "server_cache_queries")
#: vLLM's server counters (Prometheus text at ``<root>/metrics``), in prompt tokens
PROM_HITS = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits")
PROM_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries")
#: the most of a /metrics page read (vLLM's is tens of KB)
METRICS_BYTES = 4 << 20
#: the rates, in the order every view prints them
RATES = ("rollouts_per_hour", "model_calls_per_s", "prompt_tokens_per_s",
         "output_tokens_per_s", "prefix_cache_hit_rate")


@dataclass
class Tally:
    """One job's counts (module docstring); :meth:`add` takes every completion."""

    backend: str
    rollouts: int = 0
    model_calls: int = 0
    call_errors: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    usage_calls: int = 0          # calls that reported any token (a usage)
    cached_tokens: int = 0
    cache_prompt_tokens: int = 0  # prompt tokens of the calls that reported cached tokens
    server_cache_hits: int = 0    # the server's /metrics counters' change over the job
    server_cache_queries: int = 0
    run_s: float = 0.0

    def add_server(self, before: tuple[int, int] | None, after: tuple[int, int] | None) -> None:
        """The server's prefix-cache counters before and after the job (:func:`scrape`)."""
        if before is not None and after is not None and after[1] >= before[1]:
            self.server_cache_hits = max(0, after[0] - before[0])
            self.server_cache_queries = after[1] - before[1]

    def add(self, c: Any) -> None:
        if c.error is not None:  # a context overflow or provider error: no engine work
            self.call_errors += 1
            return
        self.model_calls += 1
        if self.backend in NO_USAGE_BACKENDS:
            return
        if c.prompt_tokens or c.completion_tokens:
            self.usage_calls += 1
            self.prompt_tokens += int(c.prompt_tokens)
            self.output_tokens += int(c.completion_tokens)
        cached = getattr(c, "cached_tokens", None)
        if cached is not None:
            self.cached_tokens += int(cached)
            self.cache_prompt_tokens += int(c.prompt_tokens)

    def record(self) -> dict[str, Any]:
        """The counts, ``run_s``, the rates and what they rest on (the job record's
        ``throughput``)."""
        counts = {k: v for k, v in asdict(self).items() if k != "backend"}
        return summarize(counts, self.backend)


def summarize(counts: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """Counts and ``run_s`` -> the record with every rate (null where undefined: no run
    time, no usage, no cache figure)."""
    run_s = float(counts["run_s"])
    per_s = (lambda k: counts[k] / run_s) if run_s > 0 else (lambda k: None)
    usage = counts["usage_calls"] > 0
    rec = {**{k: int(counts[k]) for k in COUNTS}, "run_s": round(run_s, 6),
           "backend": backend, "sim_agent": backend in NO_USAGE_BACKENDS,
           "rollouts_per_hour": None if run_s <= 0 else counts["rollouts"] * 3600 / run_s,
           "model_calls_per_s": per_s("model_calls"),
           "prompt_tokens_per_s": per_s("prompt_tokens") if usage else None,
           "output_tokens_per_s": per_s("output_tokens") if usage else None,
           "prefix_cache_hit_rate": counts["cached_tokens"] / counts["cache_prompt_tokens"]
           if counts["cache_prompt_tokens"] > 0 else
           counts["server_cache_hits"] / counts["server_cache_queries"]
           if counts["server_cache_queries"] > 0 else None}
    rec["tokens"] = ("the backend's usage" if usage else
                     "none: the simulated agent has no tokenizer"
                     if backend in NO_USAGE_BACKENDS else "none: the backend reported no usage")
    rec["prefix_cache"] = (
        "reported by the engine per call" if counts["cache_prompt_tokens"] > 0 else
        "the server's /metrics counters over the job (every client of the server counted)"
        if counts["server_cache_queries"] > 0 else "none: not exposed by the engine")
    return rec


def pooled(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The study's figures: the jobs' counts and run times summed (module docstring); None
    without a record."""
    recs = list(records)
    if not recs:
        return None
    counts = {k: sum(int(r[k]) for r in recs) for k in COUNTS}
    counts["run_s"] = sum(float(r["run_s"]) for r in recs)
    backends = sorted({str(r["backend"]) for r in recs})
    return summarize(counts, backends[0] if len(backends) == 1 else "+".join(backends))


def job_records(run: Path, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """``throughput`` of each job record under ``run/logs/rollout`` (job name -> record),
    of the jobs ``names`` when given (those that are missing or hold no figures left out);
    a record that is not JSON or whose figures are malformed is a one-line error naming
    the file."""
    from containmentbench.integrity.inputs import read_json

    logs = Path(run) / "logs" / "rollout"
    if not logs.is_dir():
        return {}
    # by name, not by listing: a one-shard job is named by its shard id (folders in it)
    paths = sorted(logs.glob("*.json")) if names is None else \
        [logs / f"{n}.json" for n in sorted(set(names))]
    out: dict[str, dict[str, Any]] = {}
    for p in paths:
        if not p.is_file():
            continue
        doc = read_json(p, "a rollout job record")
        rec = doc.get("throughput") if isinstance(doc, dict) else None
        if rec is None:
            continue  # written before throughput was recorded, or by a run that ran nothing
        _check(rec, p)
        out[p.relative_to(logs).as_posix().removesuffix(".json")] = rec
    return out


def _check(rec: Any, path: Path) -> None:
    if not isinstance(rec, dict):
        raise BenchError("throughput must be an object", file=str(path), field="throughput")
    for k in (*COUNTS, "run_s"):
        v = rec.get(k)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v != v:
            raise BenchError(f"throughput.{k} must be a number >= 0, not {json.dumps(v)[:40]}",
                             file=str(path), field=f"throughput.{k}")
    if not isinstance(rec.get("backend"), str):
        raise BenchError("throughput.backend must be a string", file=str(path),
                         field="throughput.backend")


def line(rec: Mapping[str, Any]) -> str:
    """One line of figures: ``24 rollouts in 3.10 s: 27,871 rollouts/h, ...``."""
    def f(k: str, unit: str, spec: str = ",.1f") -> str:
        v = rec.get(k)
        return f"{unit}: none" if v is None else f"{format(v, spec)} {unit}"

    hit = rec.get("prefix_cache_hit_rate")
    label = " [simulated agent: the harness's speed, not a model's]" if rec.get("sim_agent") \
        else ""
    return (f"{rec['rollouts']} rollouts in {float(rec['run_s']):.2f} s: "
            f"{f('rollouts_per_hour', 'rollouts/h', ',.0f')}, "
            f"{f('model_calls_per_s', 'model calls/s')}, "
            f"{f('prompt_tokens_per_s', 'prompt tok/s')}, "
            f"{f('output_tokens_per_s', 'output tok/s')}, prefix-cache hit rate "
            f"{'none (not exposed by the engine)' if hit is None else f'{hit:.1%}'}{label}")


def parse_prometheus(text: str) -> tuple[int, int] | None:
    """vLLM's prefix-cache counters (hits, queries) summed over their label sets, from a
    Prometheus text page; None when the page has no query counter."""
    hits = queries = 0.0
    seen = False
    for raw in text.splitlines():
        if not raw or raw.startswith("#"):
            continue
        name = raw.split("{", 1)[0].split(" ", 1)[0]
        if name not in (*PROM_HITS, *PROM_QUERIES):
            continue
        try:
            value = float(raw.rsplit("}", 1)[-1].split()[0])
        except (ValueError, IndexError):
            continue
        if value != value or value < 0 or value == float("inf"):
            continue
        if name in PROM_HITS:
            hits += value
        else:
            queries += value
            seen = True
    return (int(hits), int(queries)) if seen else None


def scrape(base_url: str, timeout_s: float = 5.0) -> tuple[int, int] | None:
    """The prefix-cache counters of the OpenAI-compatible server at ``base_url`` (its
    ``/v1`` dropped, ``/metrics`` added), or None when it does not answer with them: a
    figure the server does not expose is "none", never an error of the run."""
    import time

    import httpx

    root = base_url.rstrip("/").removesuffix("/v1")
    deadline = time.monotonic() + timeout_s  # a server that drips bytes: bounded too
    try:
        with httpx.Client(timeout=timeout_s) as client, \
                client.stream("GET", f"{root}/metrics") as r:
            if r.status_code != 200:
                return None
            body = bytearray()
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > METRICS_BYTES or time.monotonic() > deadline:
                    return None
    except (httpx.HTTPError, httpx.InvalidURL, OSError):
        return None
    return parse_prometheus(body.decode("utf-8", "replace"))
