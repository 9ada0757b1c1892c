"""A rollout job: one backend load, many shards (``cluster.rollout_group``).

The shard stays the unit of checksums, ``status`` and rerun: each shard is written
atomically (with ``SHARD.json``, its key) as soon as its episodes finish, and a rerun of the
job skips every shard that is finished, intact and of the same key, so a killed job redoes
only its unfinished shards. The backend is loaded only when some shard is left to run; its
load time and share of the job's wall time go to ``timings.parquet`` and the job record.
Every completion the backend returns is counted on the way (:class:`Counted`): the job's
throughput (rollouts per hour, model calls and tokens per second, prefix-cache hit rate;
``pipeline/throughput.py``) goes to the job record and the job log.

Errors are never outcomes: a shard whose share of rollouts ending in a provider error (other
than a context overflow) exceeds ``study.max_error_rate`` is not written (no
``SHA256SUMS``); an ``errored`` record names it for ``status``, and the job fails after its
other shards are written.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from containmentbench.canonical import canonical_json, sha256_json
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.pipeline.mixing import SHARD_RECORD
from containmentbench.pipeline.plan import (
    Job,
    Shard,
    errored_marker,
    job_key,
    job_marker,
    model_label,
    run_dir,
    run_key,
    shard_dir,
    shard_key,
)
from containmentbench.pipeline.throughput import Tally, job_records, scrape
from containmentbench.trace.io import CHECKSUMS, verify_shard, write_shard


def is_context_overflow(error: str | None) -> bool:
    """Provider errors that say the prompt outgrew the model's context (backends prefix
    them ``context overflow``): a property of the model, recorded, not a failed run."""
    return bool(error) and error.lower().startswith("context overflow")


def shard_record(data: dict[str, Any], s: Shard) -> bytes:
    from containmentbench.defense.identity import defense_identity
    from containmentbench.models.serving import record
    from containmentbench.models.weights import provenance

    layers = defense_identity(s.defense, data["defenses"])["layers"]
    rec = {"shard": s.id, "key": shard_key(data, s), "run_key": run_key(data),
           "model": model_label(data), "study": data["study"]["name"],
           # what status names when the shard goes stale: each layer's code and config
           "defense": {lay["key"]: {"code": lay["code"], "config": sha256_json(lay["config"])}
                       for lay in layers},
           # what status names when the engine changes (models/serving.py)
           "serving": record(data)}
    prov = provenance(data["model"].get("path"))
    if prov is not None:  # a packaged model: what was loaded, and who packaged it
        rec["model_provenance"] = prov
    return (canonical_json(rec) + "\n").encode()


def shard_is_current(data: dict[str, Any], s: Shard) -> bool:
    """Finished, intact, and written under the same shard key."""
    d = shard_dir(data, s)
    if not (d / CHECKSUMS).exists() or verify_shard(d):
        return False
    from containmentbench.integrity.inputs import load_json

    try:  # unreadable or wrong-shaped: not current, redone
        return load_json(d / SHARD_RECORD, "shard_record")["key"] == shard_key(data, s)
    except (OSError, BenchError):
        return False


def runtime_config(data: dict[str, Any]) -> Any:
    """The episode settings of a resolved study config: runtime limits, the decoding block,
    the tool mode and the parser (every place that runs episodes of a study uses this)."""
    from containmentbench.parser.modes import parser_for
    from containmentbench.runtime.episode import RuntimeConfig

    dec = data["decoding"]
    return RuntimeConfig(max_tokens=dec["max_tokens"], temperature=dec["temperature"],
                         top_p=dec["top_p"], seed_policy=dec["seed_policy"],
                         parser=parser_for(data["study"].get("parser", "current")),
                         tool_mode=data["backend"].get("tool_mode", "prompt"),
                         tools_offered=data["study"].get("tools_offered", "all"),
                         **{k: v for k, v in data["runtime"].items()
                            if k in RuntimeConfig.__dataclass_fields__})


def backend_config(data: dict[str, Any]) -> Any:
    from containmentbench.models.base import BackendConfig

    b, dec = data["backend"], data["decoding"]
    options = dict(b.get("options") or {})
    if b["name"] in ("vllm", "hf"):
        options.setdefault("max_model_len", data["model"]["max_model_len"])
        options.setdefault("dtype", data["model"]["dtype"])
    if b["name"] == "sim":
        options.setdefault("profile", data["model"]["sim_profile"])
    return BackendConfig(name=b["name"], model=data["model"]["path"] or data["model"]["name"],
                         max_tokens=dec["max_tokens"], temperature=dec["temperature"],
                         top_p=dec["top_p"], options=options,
                         tool_mode=b.get("tool_mode", "prompt"))


@dataclass
class JobResult:
    job: str
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errored: list[str] = field(default_factory=list)
    load_s: float = 0.0
    wall_s: float = 0.0
    loads: int = 0
    #: this run's counts (pipeline/throughput.py); None when no shard was left to run
    tally: Tally | None = None

    @property
    def load_share(self) -> float:
        return self.load_s / self.wall_s if self.wall_s > 0 else 0.0


class Counted:
    """The job's backend, every completion it returns counted into ``tally`` (calls,
    tokens, cached tokens); everything else is the backend's own."""

    def __init__(self, backend: Any, tally: Tally) -> None:
        self._inner, self._tally = backend, tally

    def generate(self, requests: list[Any]) -> list[Any]:
        out = self._inner.generate(requests)
        for c in out:
            self._tally.add(c)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CountedAsync(Counted):
    """:class:`Counted` for a backend with ``agenerate`` (the asynchronous driver)."""

    async def agenerate(self, request: Any) -> Any:
        c = await self._inner.agenerate(request)
        self._tally.add(c)
        return c


class _ShardRun:
    """What one shard needs to run and be written."""

    def __init__(self, data: dict[str, Any], s: Shard) -> None:
        from containmentbench.defense.loading import load_defense
        from containmentbench.runtime.driver import ShardContext
        from containmentbench.scenarios.manifest import load_scenarios
        from containmentbench.scenarios.toolsets import check_suite

        self.data, self.shard = data, s
        self.scenarios = load_scenarios(data["study"]["suite"], s.stage, s.scenario_ids)
        self.defense = load_defense(s.defense, data["defenses"])
        b = data["backend"]
        self.cfg = runtime_config(data)
        check_suite(self.scenarios, self.cfg.tools_offered, data["study"]["suite"])
        profile = data["model"]["sim_profile"] if b["name"] == "sim" else None
        self.ctx = ShardContext(data["study"]["name"], model_label(data), b["name"],
                                s.defense, s.seed, profile)


def finish_shard(sr: _ShardRun, eps: list[Any], wall: list[float], model_s: list[float],
                 seed_supported: bool, job: str, load_s: float) -> bool:
    """Gate on errors, then write the shard atomically; False when the shard errored."""
    from containmentbench.runtime.driver import shard_tables

    data, s = sr.data, sr.shard
    bound = float(data["study"].get("max_error_rate", 0.0))
    failed = [e for e in eps if e.status == "error" and not is_context_overflow(e.error)]
    marker = errored_marker(data, s)
    if eps and len(failed) / len(eps) > bound:
        from containmentbench.models.redact import configured_secrets, redact

        # a server may echo our key: never on disk or in the log (backends redact too)
        first = redact(failed[0].error or "", configured_secrets(data["backend"].get("options")))
        writer.write_text(marker, canonical_json({
            "shard": s.id, "rollouts": len(eps), "errors": len(failed),
            "error_rate": len(failed) / len(eps), "max_error_rate": bound,
            "first_error": first, "rollout_id": failed[0].spec.rollout_id}) + "\n",
            kind="errored-record")
        print(f"containmentbench: shard {s.id} errored: {len(failed)}/{len(eps)} rollouts "
              f"ended in a provider error (bound {bound:g}); first: {first}; "
              f"not written", file=sys.stderr)
        return False
    tables = shard_tables(eps, sr.ctx, sr.defense, seed_supported, wall, model_s, job, load_s)
    # force: a stale shard (finished under another key) is replaced and kept aside, never
    # deleted (integrity/writer.py); write_shard also clears what a killed run left
    write_shard(shard_dir(data, s), tables, extra={SHARD_RECORD: shard_record(data, s)},
                force=True)
    writer.remove_owned(marker, "errored-record")
    return True


def run_job(data: dict[str, Any], job: Job, quiet: bool = False, backend: Any = None,
            write_marker: bool = True, terminal: Any = None) -> JobResult:
    """Run every unfinished shard of ``job`` with one backend (loaded here unless given).
    ``terminal``: a stream that also gets the job's progress (``driver.Mirror``)."""
    from containmentbench.models.base import make_backend
    t0 = time.perf_counter()
    res = JobResult(job.name)
    pending: list[Shard] = []
    for s in job.shards:
        if shard_is_current(data, s):
            res.skipped.append(s.id)
        else:
            pending.append(s)
    if pending:
        runs = [_ShardRun(data, s) for s in pending]
        t_load = time.perf_counter()
        owned = backend is None
        if owned:
            from containmentbench.models.serving import check_engine

            check_engine(data)  # the engine is the one the shard keys record
            backend = make_backend(backend_config(data))
            res.loads = 1
        res.load_s = time.perf_counter() - t_load if owned else 0.0
        res.tally = Tally(str(data["backend"]["name"]),
                          rollouts=sum(len(r.scenarios) for r in runs))
        inner = backend
        backend = (CountedAsync if hasattr(inner, "agenerate") else Counted)(inner, res.tally)
        # a server's own prefix-cache counters, for replies that do not carry them
        url = getattr(inner, "base_url", None) if data["backend"]["name"] == "openai" else None
        cache_before = scrape(url) if isinstance(url, str) else None
        t_run = time.perf_counter()
        seed_supported = getattr(backend, "seed_supported", False)
        window = int(data["backend"]["window"])
        mirror = None
        if terminal is not None and not quiet:
            from containmentbench.runtime.driver import Mirror

            mirror = Mirror(sum(len(r.scenarios) for r in runs),
                            f"{data['study']['name']} {job.model} job {job.name}", terminal)
        try:
            if hasattr(backend, "agenerate"):
                import asyncio

                asyncio.run(_run_async(runs, backend, window, res, seed_supported, job.name,
                                       quiet, mirror))
            else:
                _run_lockstep(runs, backend, window, res, seed_supported, job.name, quiet,
                              mirror)
        finally:
            res.tally.run_s = time.perf_counter() - t_run
            if cache_before is not None:
                res.tally.add_server(cache_before, scrape(url))
            if owned:
                inner.close()
    res.wall_s = time.perf_counter() - t0
    _record(data, job, res)
    if write_marker and not res.errored:
        writer.write_text(job_marker(data, job), canonical_json(
            {"job": job.name, "key": job_key(data, job),
             "shards": [s.id for s in job.shards]}) + "\n", kind="job-marker")
    return res


def _run_lockstep(runs: list[_ShardRun], backend: Any, window: int, res: JobResult,
                  seed_supported: bool, job: str, quiet: bool, mirror: Any = None) -> None:
    """One lockstep loop over the episodes of every pending shard (so the batch stays full
    across shard boundaries); each shard is written as soon as its last episode finishes."""
    from containmentbench.runtime.driver import Progress, drive_lockstep, new_episode

    index = [(r, k) for r, sr in enumerate(runs) for k in range(len(sr.scenarios))]
    makers = [lambda sr=runs[r], k=k: new_episode(sr.scenarios[k], sr.defense, sr.ctx,
                                                  sr.cfg, backend)
              for r, k in index]
    eps = [[None] * len(sr.scenarios) for sr in runs]
    wall = [[0.0] * len(sr.scenarios) for sr in runs]
    model_s = [[0.0] * len(sr.scenarios) for sr in runs]
    left = [len(sr.scenarios) for sr in runs]

    def finished(i: int, ep: Any, w: float, m: float) -> None:
        r, k = index[i]
        eps[r][k], wall[r][k], model_s[r][k] = ep, w, m
        left[r] -= 1
        if left[r] == 0:
            ok = finish_shard(runs[r], eps[r], wall[r], model_s[r], seed_supported, job,
                              res.load_s)
            (res.done if ok else res.errored).append(runs[r].shard.id)
            eps[r] = []  # the shard is on disk: free its episodes

    prog = None if quiet else Progress(len(index), f"job {job}", mirror=mirror)
    drive_lockstep(makers, backend, window, prog, finished)


async def _run_async(runs: list[_ShardRun], backend: Any, window: int, res: JobResult,
                     seed_supported: bool, job: str, quiet: bool, mirror: Any = None) -> None:
    """Every pending shard's episodes in one event loop (one running batch for the engine);
    each shard is written as soon as its own episodes are finished."""
    import asyncio

    from containmentbench.runtime.driver import Progress, arun_episodes

    sem = asyncio.Semaphore(max(window, 1))

    async def shard(sr: _ShardRun) -> None:
        prog = None if quiet else Progress(len(sr.scenarios), sr.shard.id, mirror=mirror)
        eps, wall, model_s = await arun_episodes(sr.scenarios, sr.defense, backend, sr.ctx,
                                                 sr.cfg, sem, prog)
        ok = finish_shard(sr, eps, wall, model_s, seed_supported, job, res.load_s)
        (res.done if ok else res.errored).append(sr.shard.id)

    await asyncio.gather(*(shard(sr) for sr in runs))


def _record(data: dict[str, Any], job: Job, res: JobResult) -> None:
    """The job's timing record beside its log (wall clock: never hashed or frozen). Its
    ``throughput`` is that of the last run of the job that ran shards: a rerun that finds
    every shard finished keeps it."""
    root = run_dir(data)
    logs = root / "logs" / "rollout"
    rec: dict[str, Any] = {
        "job": job.name, "shards": len(job.shards), "ran": len(res.done) + len(res.errored),
        "skipped": len(res.skipped), "errored": res.errored, "backend_loads": res.loads,
        "load_s": round(res.load_s, 6), "wall_s": round(res.wall_s, 6),
        "load_share": round(res.load_share, 6)}
    if res.tally is not None:
        rec["throughput"] = res.tally.record()
    else:
        try:
            before = job_records(root, [job.name]).get(job.name)
        except BenchError:  # a damaged record: its figures are not carried over
            before = None
        if before is not None:
            rec["throughput"] = before
    writer.write_text(logs / f"{job.name}.json", json.dumps(rec, indent=2, sort_keys=True)
                      + "\n", kind="job-log", sync=False)
