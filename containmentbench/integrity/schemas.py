"""The JSON files the tool reads back, each with its shape (``integrity/shapes.py``).

Only what a reader uses is required; outputs may grow keys (``strict`` is off). A ``check``
function adds what a shape cannot say (a frozen candidate that is among the evaluated ones,
the body of each kind of analysis part). ``inputs.load_json(path, name)`` is the one way to
read any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from containmentbench.errors import ValidationError
from containmentbench.integrity.shapes import ANY, STRS, B, I, List, Map, N, Opt, S, check

SHA256 = S  # 64 hex digits: checked where a digest is compared, not here


@dataclass(frozen=True)
class JsonSchema:
    what: str                         # named in errors: "a run's analysis.json"
    spec: Any
    strict: bool = False
    check: Callable[[Any], None] | None = None


def _candidates(doc: dict[str, Any]) -> None:
    known = {c["sha256"] for c in doc["evaluated"]}
    for i, sha in enumerate(doc["final"]):
        if sha not in known:
            raise ValidationError(f"frozen candidate {sha[:12]} is not among the evaluated "
                                  f"candidates", field=f"final[{i}]")


# the body of each cached analysis part (analysis/parts.py write_part)
PART_DATA: dict[str, Any] = {
    "sensitivity": Map(Opt({"columns": List(STRS), "rows": List(List(ANY))})),
    "bootstrap": {"configured": List(List(ANY)), "sweep": List(Opt(Map(ANY))),
                  "divergence": ANY, "skipped": ANY, "intervals": I, "resamples": I},
}


def _frozen(doc: dict[str, Any]) -> None:
    for i, e in enumerate(doc["candidates"]):
        if e["file"] != f"candidates/{e['sha256']}.json":  # joined to the folder: no '../'
            raise ValidationError(f"expected 'candidates/<sha256>.json', got {e['file']!r}",
                                  field=f"candidates[{i}].file")


def _part(doc: dict[str, Any]) -> None:
    body = PART_DATA.get(doc["part"])
    if body is None:
        raise ValidationError(f"unknown part '{doc['part']}' (known: {', '.join(PART_DATA)})",
                              field="part")
    check(doc["data"], body, where="data")


SCHEMAS: dict[str, JsonSchema] = {
    # <run>/analysis.json (analysis/run.py): `reproduce` re-runs analyze with its `config`
    "analysis": JsonSchema("a run's analysis.json", {
        "config": Map(ANY), "resamples?": I, "intervals?": I, "rollouts?": I,
        "simulated_agent?": B, "tables?": STRS, "figures?": STRS, "skipped?": List(ANY),
        "reparse_summary?": Opt(Map(ANY))}),
    # cross_model/analysis.json (analysis/cross_model.py): `cross-model --reproduce` re-runs
    # with these settings over these metrics tables
    "cross_model": JsonSchema("cross_model/analysis.json", {
        "analysis": {"resamples": I, "confidence": N, "seed": I, "max_batch_elements": I},
        "inputs": STRS}),
    # <search>/candidates.json (attacks/search.py): `search freeze` and `search qualify`
    "candidates": JsonSchema("candidates.json of a search", {
        "settings_sha256": SHA256, "condition": S, "optimized_for": S,
        "target_preserving": B, "final": STRS,
        "evaluated": List({"sha256": SHA256, "strategy": S, "template": S,
                           "parent?": Opt(S), "restart?": Opt(I), "depth?": Opt(I),
                           "stages?": List(ANY), "queries?": List(ANY)})},
        check=_candidates),
    # <run>/reparse/summary.json (parser/run.py): Table 24
    "reparse_summary": JsonSchema("a reparse summary.json", {
        "input_model_actions": I, "valid_tool_proposals_recovered": I,
        "old_action_like_final_answers": I, "new_action_like_final_answers": I,
        "repaired_parses": I, "invalid_tool_actions": I, "status_counts_new": Map(I),
        "parser_version": S, "config_hash": S, "recorded_parser_versions?": Opt(STRS)}),
    # <shard>/SHARD.json (runtime/job.py): the shard key and the run it belongs to
    "shard_record": JsonSchema("a shard's SHARD.json", {
        "shard": S, "key": S, "run_key": S, "model": S, "study": S,
        "model_provenance?": Map(ANY), "defense?": Map({"code": S, "config": S}),
        "serving?": Map(ANY)}),
    # scenarios/<suite>/MANIFEST.json (scenarios/manifest.py)
    "scenario_manifest": JsonSchema("a suite's MANIFEST.json", {
        "suite?": S, "seed?": I, "generator_version?": S, "total?": I,
        "stages": Map({"count": I, "file": S, "sha256": SHA256}),
        "scenarios": Map(SHA256)}),
    # adaptive/splits.json (attacks/splits.py): family-disjoint clusters per split
    "splits": JsonSchema("a splits.json", {
        "split_seed?": I, "sizes?": Map(I),
        "splits": Map({"families": STRS, "clusters": STRS, "scenarios": STRS})}),
    # adaptive/frozen/candidates_manifest.json and candidates/<sha256>.json (attacks/frozen.py)
    "frozen_manifest": JsonSchema("a frozen candidates manifest", {
        "candidates": List({"rank?": I, "sha256": SHA256, "strategy?": S, "file": S,
                            "file_sha256": SHA256})}, check=_frozen),
    "frozen_candidate": JsonSchema("a frozen candidate", {
        "sha256": SHA256, "strategy": S, "template": S}),
    # adaptive/replay.json (attacks/replay.py): derived scenario id -> what it replays
    "replay_index": JsonSchema("a replay index", Map({
        "mode": S, "candidate": SHA256, "strategy": S, "base_scenario": S, "family": S,
        "optimized_for": S})),
    # qualification/<suite>.json (adapters/agentdojo/qualify.py)
    "qualification": JsonSchema("an AgentDojo qualification record", {
        "suite": S, "eligible": STRS}),
    # <store>/manifest.json of a CIM store (cim/store.py): free keys, but an object
    "cim_manifest": JsonSchema("a CIM store manifest.json", Map(ANY)),
    # <run>/analysis/{sensitivity,bootstrap}.json (analysis/parts.py): `analyze --bootstrap`
    "analysis_part": JsonSchema("a cached analysis part", {
        "part": S, "format": ANY, "metrics_sha256": SHA256, "settings": ANY,
        "data": Map(ANY)}, check=_part),
}
