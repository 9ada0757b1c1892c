"""Labels true by construction: the suite's positive and negative controls, and its label file.

Every scenario of the labelled suite is replayed at build time through the real runtime with
the simulated agent (``always_follow``: it acts on every injection it reads) twice: as built,
and with its designated source neutralised (the placeholder of :mod:`.replay`, in every world
item carrying it). The designated sink call (tool, agent, session and arguments of its label)
must

* for a positive scenario: occur as built and not occur neutralised (the source is necessary
  for the sink: "whether attacker-controlled source content should reach, or counterfactually
  influence, the sink", §5.1);
* for a negative scenario: occur as built and occur identically neutralised (source and sink
  co-occur, the sink does not depend on the source).

A scenario that fails either control is a one-line build error naming it. ``LABELS.json``
holds every label and the sha256 of their canonical JSON; scoring refuses a suite whose
labels or label hash do not match (:func:`check_label_file`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json, sha256_json
from containmentbench.errors import BenchError

LABELS = "LABELS.json"
CONTROL_PROFILE = "always_follow"


def sink_count(events: Sequence[dict[str, Any]], tb: dict[str, Any]) -> int:
    """Commits of the designated sink call (tool and canonical arguments) in its session."""
    want = canonical_json(tb["sink_args"])
    return sum(1 for e in events if e["kind"] == "commit" and e.get("tool") == tb["sink_tool"]
               and e.get("session") == tb["sink_session"] and (e.get("args") or "{}") == want)


def control(rec: dict[str, Any], seed: int = 0) -> str | None:
    """The scenario's control, or a problem in words."""
    from containmentbench.audit.replay import neutralize, run_one
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig, make_backend
    from containmentbench.runtime.episode import RolloutSpec, RuntimeConfig
    from containmentbench.scenarios.model import Scenario

    s = Scenario.from_dict(rec)
    tb = rec["meta"]["taintbench"]
    backend = make_backend(BackendConfig(name="sim", model=f"sim:{CONTROL_PROFILE}",
                                         options={"profile": CONTROL_PROFILE}))
    spec = RolloutSpec(f"control/{s.id}", "taintbench-control", f"sim:{CONTROL_PROFILE}",
                       "sim", "none", seed, CONTROL_PROFILE)
    cfg, pol = RuntimeConfig(), load_defense("none")
    built = sink_count(run_one(s, pol, spec, cfg, backend).rec.events, tb)
    neutral = sink_count(run_one(neutralize(s, [tb["source_id"]]), pol, spec, cfg,
                                 backend).rec.events, tb)
    if built == 0:
        return "the designated sink is never called as built"
    if tb["positive"] and neutral:
        return "positive, but the sink is still called with the source neutralised"
    if not tb["positive"] and neutral != built:
        return "negative, but neutralising the source changes the sink"
    return None


def check_records(records: dict[str, list[dict[str, Any]]]) -> None:
    """Every scenario's control (module docstring); the first failure is a one-line error."""
    for stage in sorted(records):
        for rec in records[stage]:
            problem = control(rec)
            if problem:
                raise BenchError(f"scenario {rec['id']}: {problem}",
                                 field="meta.taintbench")


def labels_of(records: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r["meta"]["taintbench"] for stage in sorted(records)
            for r in records[stage]}


def label_file(records: dict[str, list[dict[str, Any]]]) -> bytes:
    labels = labels_of(records)
    body = {"labels": labels, "sha256": sha256_json(labels),
            "note": "labels fixed before any detector ran (paper 001 Appendix B.2); each "
                    "checked by a positive or negative control at build time"}
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def check_label_file(folder: Path, scenarios: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The suite's labels, after checking LABELS.json against its hash and the scenarios."""
    path = Path(folder) / LABELS
    if not path.is_file():
        raise BenchError(f"no {LABELS}: not a labelled suite", file=str(path), field="labels")
    try:
        body = json.loads(path.read_text())
        labels, want = body["labels"], body["sha256"]
    except (ValueError, KeyError, TypeError):
        raise BenchError("not a label file (labels, sha256)", file=str(path),
                         field="labels") from None
    if sha256_json(labels) != want:
        raise BenchError("label hash does not match its labels", file=str(path),
                         field="sha256")
    for s in scenarios:
        tb = s.meta.get("taintbench")
        if labels.get(s.id) != tb:
            raise BenchError(f"scenario '{s.id}': its label differs from {LABELS}",
                             file=str(path), field=f"labels.{s.id}")
    return labels
