"""The study plan: which rollout shards exist and where every output goes.

A shard is a block of scenarios of one stage x one defense x one seed x one model (at most
``study.shard_size`` scenarios). Paths (design: "Data flow")::

    <results>/<study>/traces/<model>/<defense>/seed=<s>/<stage>/shard-<k>/SHA256SUMS
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.errors import BenchError


@dataclass(frozen=True)
class Shard:
    model: str          # path-safe model label
    defense: str
    seed: int
    stage: str
    index: int
    scenario_ids: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.model}/{self.defense}/seed={self.seed}/{self.stage}/shard-{self.index:03d}"


def model_label(data: dict[str, Any]) -> str:
    """The model name recorded in traces (sim runs carry their profile)."""
    adapter = data["study"].get("adapter") or {}
    if adapter.get("name") and adapter.get("pipeline") == "ground_truth":
        return f"{adapter['name']}-ground_truth"  # no model: the benchmark's ground truth
    if data["backend"]["name"] == "sim":
        return f"sim:{data['model']['sim_profile']}"
    return data["model"]["name"]


def model_slug(data: dict[str, Any]) -> str:
    return model_label(data).replace(":", "-").replace("/", "_")


def study_dir(data: dict[str, Any]) -> Path:
    return Path(data["results_dir"]) / data["study"]["name"]


def shards(data: dict[str, Any]) -> list[Shard]:
    from containmentbench.scenarios.manifest import load_suite

    study = data["study"]
    if (study.get("adapter") or {}).get("name"):  # an external benchmark (paper 000 §6.4)
        from containmentbench.adapters.study import adapter_shards
        return adapter_shards(data)
    scen = load_suite(study["suite"])
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


def shard_by_id(data: dict[str, Any], shard_id: str) -> Shard:
    for s in shards(data):
        if s.id == shard_id:
            return s
    raise BenchError(f"no shard '{shard_id}' in study '{data['study']['name']}'", field="shard")


def shard_key(data: dict[str, Any], shard: Shard) -> str:
    """A hash of everything that determines a shard's traces (a Snakemake params value, so a
    change in model, backend, defense configuration or runtime settings reruns the shard and
    a change in, say, the analysis plan does not)."""
    return sha256_json({"shard": shard.id, "scenarios": list(shard.scenario_ids),
                        "model": data["model"], "backend": data["backend"],
                        "defense": data["defenses"][shard.defense],
                        "runtime": data["runtime"], "study": data["study"]["name"],
                        "suite": data["study"]["suite"]})[:16]


def trace_dir(data: dict[str, Any]) -> Path:
    return study_dir(data) / "traces"


def shard_dir(data: dict[str, Any], shard: Shard) -> Path:
    return trace_dir(data) / shard.id
