"""A shard and the model label of its run: the smallest pieces of the study plan.

They live apart from ``plan.py`` so that the adapters' studies (``adapters/study.py``), which
``plan.shards`` asks for an external benchmark's shards, can build shards without importing the
plan (the plan imports them; ``plan`` re-exports all three names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
