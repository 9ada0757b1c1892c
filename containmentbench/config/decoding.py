"""The study's decoding block (``decoding`` config group) and what it means for seeds.

A rollout seed only means something when decoding samples: every request's sampler is seeded
from its rollout seed (``runtime.episode``), so seeds 1..5 are five replicates, and the same
seed gives the same bytes. Greedy decoding (``temperature: 0``) ignores the seed, so five seeds
would be five copies that the pair bootstrap counts as independent (paper 000 §6.5 resamples
(scenario, seed) pairs; Appendix J, Table 26, reads seed variance). A real-model study that
decodes greedily with more than one seed is therefore refused unless it declares its seeds
``non_replicates``; every interval then uses one seed (:func:`interval_seeds`).

The block is recorded in every rollout row (``rollouts.decoding``, canonical JSON), hence in
the metrics, in each shard's key, in table captions, in the report and in ``MANIFEST.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from containmentbench.canonical import canonical_json
from containmentbench.errors import BenchError

SEED_POLICIES = ("replicates", "non_replicates")
#: backends whose answers come from a model (the sim and scripted agents draw their own seeds)
MODEL_BACKENDS = frozenset({"vllm", "openai", "hf"})
#: backends that can constrain decoding to a JSON schema (``tool_mode: constrained``)
CONSTRAINING_BACKENDS = frozenset({"vllm", "openai"})
FIELDS = ("temperature", "top_p", "max_tokens", "seed_policy")


def block(data: Mapping[str, Any]) -> dict[str, Any]:
    """The decoding block of a resolved config, every field present."""
    d = data.get("decoding")
    if not isinstance(d, Mapping):
        raise BenchError("missing or not a mapping", field="decoding")
    missing = [k for k in FIELDS if k not in d]
    if missing:
        raise BenchError("missing", field=f"decoding.{missing[0]}")
    return {k: d[k] for k in FIELDS}


def record(data: Mapping[str, Any]) -> str:
    """What every rollout row records (canonical JSON of the block)."""
    return canonical_json(block(data))


def model_backend(data: Mapping[str, Any]) -> bool:
    """Whether the study's answers come from a model (not the simulated or scripted agent,
    not an external benchmark's ground truth)."""
    adapter = (data.get("study") or {}).get("adapter") or {}
    if adapter.get("name") and adapter.get("pipeline") == "ground_truth":
        return False
    return data["backend"]["name"] in MODEL_BACKENDS


def check(data: Mapping[str, Any]) -> None:
    """One-line errors (exit 2) before any job: an unknown seed policy, a greedy real-model
    study with several seeds that does not declare them copies, a constrained tool mode on a
    backend that cannot constrain."""
    d = block(data)
    if d["seed_policy"] not in SEED_POLICIES:
        raise BenchError(f"unknown seed policy '{d['seed_policy']}' (known: "
                         f"{', '.join(SEED_POLICIES)})", field="decoding.seed_policy")
    seeds = list((data.get("study") or {}).get("seeds") or [])
    if (model_backend(data) and float(d["temperature"]) == 0.0 and len(seeds) > 1
            and d["seed_policy"] == "replicates"):
        raise BenchError(f"greedy decoding (temperature 0) ignores the seed, so the "
                         f"{len(seeds)} seeds would be copies, not replicates: sample "
                         f"(decoding=sampled) or declare decoding.seed_policy=non_replicates",
                         field="decoding.seed_policy")
    backend = data["backend"]
    if backend.get("tool_mode") == "constrained" and backend["name"] not in CONSTRAINING_BACKENDS:
        raise BenchError(f"backend '{backend['name']}' cannot constrain decoding (tool_mode "
                         f"constrained needs {' or '.join(sorted(CONSTRAINING_BACKENDS))})",
                         field="backend.tool_mode")


def parse_record(text: str | None) -> dict[str, Any] | None:
    import json

    return json.loads(text) if text else None


def describe(decoding: Mapping[str, Any] | None, backend: str) -> str:
    """One phrase for captions and the report."""
    if backend in ("sim", "scripted") or decoding is None:
        return "decoding: not applicable (the simulated agent draws from its own seeded generator)"
    t = float(decoding["temperature"])
    how = "greedy" if t == 0.0 else f"sampled at temperature {t:g}, top_p {float(decoding['top_p']):g}"
    seeds = ("seeds are replicates (per-request sampler seeds)"
             if decoding["seed_policy"] == "replicates"
             else "seeds declared non-replicates (intervals use one seed)")
    return f"decoding: {how}, max_tokens {int(decoding['max_tokens'])}; {seeds}"


def interval_seeds(decoding: Mapping[str, Any] | None, seeds: list[int]) -> list[int]:
    """The seeds an interval resamples: all of them, or the first one when the study declared
    its seeds non-replicates (copies must not be counted as independent pairs, §6.5)."""
    if decoding is not None and decoding.get("seed_policy") == "non_replicates" and seeds:
        return [min(seeds)]
    return sorted(seeds)
