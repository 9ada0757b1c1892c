"""The study plan: which rollout shards and jobs exist and where every output goes.

A study may list several models (``study.models``); each model is a *run* with its own run
directory, so traces, metrics and tables of two models are never pooled::

    <results>/<study>/<model_slug>/traces/<model_slug>/<defense>/seed=<s>/<stage>/shard-<k>/
    <results>/<study>/<model_slug>/{jobs,reparse,metrics,tables,figures,logs}/ ...
    <results>/<study>/cross_model/...          (only when the study lists more than one model)

A shard is a block of scenarios of one stage x one defense x one seed x one model (at most
``study.shard_size`` scenarios); it is the unit of checksums, ``status`` and rerun. A *job*
groups shards that one process runs with one loaded backend (``cluster.rollout_group``).
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.errors import BenchError
from containmentbench.pipeline.shard import Shard, model_label, model_slug

#: backend options that change how calls reach the model, never what it answers: they stay
#: out of the shard key, so a new port or a larger concurrency redoes no finished shard
OPERATIONAL_OPTIONS = frozenset({
    "base_url", "api_key", "api_key_env", "concurrency", "timeout_s", "connect_timeout_s",
    "max_retries", "backoff_base_s", "backoff_max_s", "retry_seed", "latency_ms",
    "request_timeout_s", "headers", "max_response_bytes"})
#: backend settings that are operational in the same sense (episodes in flight)
OPERATIONAL_SETTINGS = frozenset({"window"})
#: ``cluster.rollout_group``: which shards one rollout job runs (the engine is loaded once per
#: job); ``shard`` is one shard per job
ROLLOUT_GROUPS = ("model", "seed", "defense_seed", "shard")


@dataclass(frozen=True)
class Job:
    """Shards run by one rollout process with one loaded backend."""

    model: str
    name: str                      # path-safe, unique within the model's run
    shards: tuple[Shard, ...]
    # the job marker's generation: a job that must run again after its marker was written
    # (a shard corrupt, stale, deleted or restored) asks for the next marker name, so
    # Snakemake sees a missing output without the pre-flight deleting anything
    # (pipeline/preflight.py)
    generation: int = 0

    @property
    def wildcard(self) -> str:
        """The rollout rule's ``{job}``: ``<name>``, then ``<name>.redo-<n>`` for
        generation n (its marker is ``jobs/<wildcard>.done``, its log
        ``logs/rollout/<wildcard>.log``)."""
        return self.name if not self.generation else f"{self.name}.redo-{self.generation}"


_REDO = re.compile(r"^(?P<name>.+)\.redo-(?P<gen>[1-9][0-9]*)$")


def split_generation(name: str) -> tuple[str, int]:
    """``seed-1.redo-2`` -> ``("seed-1", 2)``; a job name without the suffix is generation
    0 (no job name ends in ``.redo-<n>``: they end in ``all``, ``seed-<s>``, ``shard-<k>``)."""
    m = _REDO.match(name)
    return (m["name"], int(m["gen"])) if m else (name, 0)


@dataclass(frozen=True)
class _Ref:
    id: str
    stage: str


def study_root(data: dict[str, Any]) -> Path:
    """``<results>/<study>``: holds one run directory per model (and ``cross_model/``)."""
    return Path(data["results_dir"]) / data["study"]["name"]


def run_dir(data: dict[str, Any]) -> Path:
    """``<results>/<study>/<model_slug>``: everything of one model of a study."""
    return study_root(data) / model_slug(data)


# every verb that takes a "study dir" takes a run directory
study_dir = run_dir


def cross_model_dir(data: dict[str, Any]) -> Path:
    return study_root(data) / "cross_model"


def shards(data: dict[str, Any]) -> list[Shard]:
    from containmentbench.scenarios.manifest import suite_index

    study = data["study"]
    if (study.get("adapter") or {}).get("name"):  # an external benchmark (paper 000 §6.4)
        from containmentbench.adapters.study import adapter_shards
        return adapter_shards(data)
    # ids and stages only: every rollout job plans the study, and validating all 504
    # scenarios there cost more than most shards' own work
    scen = [_Ref(sid, st) for st, sid in suite_index(study["suite"])]
    wanted = set(study.get("scenarios") or [])
    if wanted:
        missing = sorted(wanted - {s.id for s in scen})
        if missing:
            raise BenchError(f"scenario '{missing[0]}' not in suite '{study['suite']}'",
                             field="study.scenarios")
    out: list[Shard] = []
    size = int(study["shard_size"])
    slug = model_slug(data)
    for defense in study["defenses"]:
        for seed in study["seeds"]:
            for stage in study["stages"]:
                ids = [s.id for s in scen if s.stage == stage and (not wanted or s.id in wanted)]
                for k in range(0, len(ids), size):
                    out.append(Shard(slug, defense, int(seed), stage, k // size,
                                     tuple(ids[k:k + size])))
    return out


def _job_name(group: str, s: Shard) -> str:
    if group == "model":
        return "all"
    if group == "seed":
        return f"seed-{s.seed}"
    if group == "defense_seed":
        return f"{s.defense}.seed-{s.seed}"
    return f"{s.defense}.seed-{s.seed}.{s.stage}.shard-{s.index:03d}"


def rollout_group(data: dict[str, Any]) -> str:
    group = data["cluster"].get("rollout_group", "seed")
    if group not in ROLLOUT_GROUPS:
        raise BenchError(f"unknown rollout group '{group}' (known: {', '.join(ROLLOUT_GROUPS)})",
                         field="cluster.rollout_group")
    return group


def jobs(data: dict[str, Any], all_shards: list[Shard] | None = None) -> list[Job]:
    """The rollout jobs of one run, in plan order (``cluster.rollout_group``)."""
    group = rollout_group(data)
    by: dict[str, list[Shard]] = {}
    for s in all_shards if all_shards is not None else shards(data):
        by.setdefault(_job_name(group, s), []).append(s)
    slug = model_slug(data)
    return [Job(slug, name, tuple(sh)) for name, sh in by.items()]


def job_by_name(data: dict[str, Any], name: str,
                all_shards: list[Shard] | None = None) -> Job:
    """The job named ``name`` (a marker generation suffix, ``.redo-<n>``, is kept)."""
    base, gen = split_generation(name)
    for j in jobs(data, all_shards):
        if j.name == base:
            return replace(j, generation=gen)
    raise BenchError(f"no rollout job '{name}' in study '{data['study']['name']}' "
                     f"(model {model_label(data)})", field="job")


def shard_by_id(data: dict[str, Any], shard_id: str,
                all_shards: list[Shard] | None = None) -> Shard:
    for s in all_shards if all_shards is not None else shards(data):
        if s.id == shard_id:
            return s
    raise BenchError(f"no shard '{shard_id}' in study '{data['study']['name']}'", field="shard")


def backend_identity(backend: dict[str, Any]) -> dict[str, Any]:
    """The backend settings that decide what the model answers (operational ones dropped)."""
    out = {k: v for k, v in backend.items() if k not in OPERATIONAL_SETTINGS}
    out["options"] = {k: v for k, v in (backend.get("options") or {}).items()
                      if k not in OPERATIONAL_OPTIONS}
    return out


def run_key(data: dict[str, Any]) -> str:
    """A hash of what every shard of one run shares (model, backend identity, runtime, study,
    suite, the sim profile's content): two shards with different run keys must never be
    pooled into one table."""
    from containmentbench.models.serving import record

    return sha256_json({"model": data["model"], "backend": backend_identity(data["backend"]),
                        "decoding": data["decoding"], "serving": record(data),
                        "runtime": data["runtime"], "study": data["study"]["name"],
                        "suite": data["study"]["suite"], **_parser_mode(data),
                        **_tools_offered(data), **_profile(data)})[:16]


def shard_key(data: dict[str, Any], shard: Shard) -> str:
    """A hash of everything that determines a shard's traces (so a change in model, backend,
    serving engine or its version, tool parser, chat template, quantization, tool mode, tools offered, decoding, defense configuration or code, runtime settings, the
    bytes of its scenarios or the sim profile's content reruns the shard, and a change in,
    say, the analysis plan, a server's port or the concurrency does not)."""
    from containmentbench.defense.identity import defense_identity
    from containmentbench.models.serving import record
    from containmentbench.pipeline.content import scenario_digest

    content = scenario_digest(data, shard.scenario_ids)
    return sha256_json({"shard": shard.id, "scenarios": list(shard.scenario_ids),
                        "model": data["model"],
                        "backend": backend_identity(data["backend"]),
                        "decoding": data["decoding"],
                        # engine, version, parser, template, quantization, decoding sent,
                        # tool mode (models/serving.py): another engine is another shard
                        "serving": record(data),
                        # each layer's configuration and code (defense/identity.py)
                        "defense": defense_identity(shard.defense, data["defenses"]),
                        "runtime": data["runtime"], "study": data["study"]["name"],
                        "suite": data["study"]["suite"], **_parser_mode(data),
                        **_tools_offered(data), **_profile(data),
                        **({"scenario_sha256": content} if content else {})})[:16]


def _profile(data: dict[str, Any]) -> dict[str, str]:
    """The sim profile's content (its name alone let an edited profile file pass)."""
    from containmentbench.pipeline.content import sim_profile_digest

    digest = sim_profile_digest(data)
    return {"sim_profile_sha256": digest} if digest else {}


def _parser_mode(data: dict[str, Any]) -> dict[str, str]:
    """study.parser changes what the traces record (Table 24); "current" adds nothing, so
    the keys of existing current-parser shards stay as they were."""
    mode = data["study"].get("parser", "current")
    return {} if mode == "current" else {"parser": mode}


def _tools_offered(data: dict[str, Any]) -> dict[str, str]:
    """study.tools_offered changes what every agent is offered (scenarios/toolsets.py); "all"
    adds nothing, so the keys of shards written before the factor existed stay as they were."""
    mode = data["study"].get("tools_offered", "all")
    return {} if mode == "all" else {"tools_offered": mode}


def job_key(data: dict[str, Any], job: Job) -> str:
    return sha256_json([shard_key(data, s) for s in job.shards])[:16]


def trace_dir(data: dict[str, Any]) -> Path:
    return run_dir(data) / "traces"


def shard_dir(data: dict[str, Any], shard: Shard) -> Path:
    return trace_dir(data) / shard.id


def job_marker(data: dict[str, Any], job: Job) -> Path:
    """Written when every shard of the job is finished (the Snakemake output of a job)."""
    return run_dir(data) / "jobs" / f"{job.wildcard}.done"


def marker_generations(data: dict[str, Any], job: Job) -> list[int]:
    """The generations of ``job``'s markers present on disk, ascending."""
    folder = run_dir(data) / "jobs"
    if not folder.is_dir():
        return []
    out = []
    for p in folder.glob(f"{glob.escape(job.name)}*.done"):
        name, gen = split_generation(p.name[:-len(".done")])
        if name == job.name:
            out.append(gen)
    return sorted(out)


def job_log(data: dict[str, Any], job: Job) -> Path:
    return run_dir(data) / "logs" / "rollout" / f"{job.wildcard}.log"


def errored_marker(data: dict[str, Any], shard: Shard) -> Path:
    """Written when a shard's model-call errors exceed the bound (``status``: errored)."""
    return run_dir(data) / "logs" / "errored" / f"{shard.id}.json"
