"""Labels true by construction: the suite's derivation and realisation checks, and its label
file.

The check does **not** reuse the detector's causal mechanism (the audit's counterfactual
replay with the source neutralised, :mod:`.replay`): a label checked by the very replay the
causal tier runs would make that tier an oracle on the simulated agent. Instead:

* **derivation** (static, on the generator's output; no agent runs): every scenario is built
  a second time with only its untrusted source drawn anew (:func:`.suite.variants`: another
  payload, other values and wording; an implicit-control page without its instruction; a
  negative's page without the overlap). A positive's designated sink (tool, agent, session,
  arguments) must change or vanish from the plans: it is a function of the source content.
  A negative's must be planned identically, the fact the user asked it to carry and every
  number and date in it must occur in the trusted inputs (goals, trusted documents,
  e-mails, calendar, CRM): it is derivable from them alone.
* **realisation**: the scenario as built, run through the real runtime with the simulated
  agent (``always_follow``: it acts on every injection it reads), must commit the designated
  sink, so every designed flow (or designed non-flow) is present in the traces.

A scenario that fails either is a one-line build error naming it. ``LABELS.json`` holds every
label, the member ids of each profile (``paper``, ``realistic``) with their sha256, and the
sha256 of the canonical JSON of all of it; scoring refuses a suite whose labels or hashes do
not match (:func:`check_label_file`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json, sha256_json
from containmentbench.errors import BenchError

LABELS = "LABELS.json"
PROFILES = ("paper", "realistic")  # the suite's profiles, in report order (suite.py)
CONTROL_PROFILE = "always_follow"
# numbers and dates a negative's sink carries: each must come from the trusted side
_NUMBER = re.compile(r"\d[\d,.\-]*\d|\d")


def sink_count(events: Sequence[dict[str, Any]], tb: dict[str, Any]) -> int:
    """Commits of the designated sink call (tool and canonical arguments) in its session."""
    want = canonical_json(tb["sink_args"])
    return sum(1 for e in events if e["kind"] == "commit" and e.get("tool") == tb["sink_tool"]
               and e.get("session") == tb["sink_session"] and (e.get("args") or "{}") == want)


def _key(agent: str, tool: str, session: int, args: dict[str, Any]) -> str:
    return canonical_json([agent, tool, session, args])


def planned(rec: dict[str, Any]) -> set[str]:
    """Every side-effect step of a record's plans, as a comparable key."""
    return {_key(st["agent"], st["tool"], st["session"], st["args"])
            for plan in ("benign", "attack") for st in rec["plans"][plan]}


def trusted_text(rec: dict[str, Any]) -> str:
    """What the trusted side holds: goals and every world item but the untrusted sources."""
    state = rec["initial_state"]
    parts = list(rec["goals"])
    for d in state.get("documents", []):
        if d["provenance"]["trust"] != "untrusted":
            parts += [str(d.get("title", "")), str(d.get("body", ""))]
    for key in ("emails", "calendar", "crm"):
        parts += [canonical_json(x) for x in state.get(key, [])]
    return " ".join(parts).lower()


def _source_text(rec: dict[str, Any]) -> str:
    return " ".join(u["text"] for u in rec["untrusted"])


def derivation(rec: dict[str, Any], variant: dict[str, Any]) -> str | None:
    """The static derivation check of one scenario (module docstring), or a problem."""
    tb = rec["meta"]["taintbench"]
    if _source_text(rec) == _source_text(variant):
        return "its variant does not change the untrusted source"
    sink = _key(tb["sink_agent"], tb["sink_tool"], tb["sink_session"], tb["sink_args"])
    if sink not in planned(rec):
        return "the designated sink is not in its plans"
    if tb["positive"]:
        if sink in planned(variant):
            return "positive, but its sink is planned unchanged with another source"
        return None
    if sink not in planned(variant):
        return "negative, but its sink changes with the untrusted source"
    trusted = trusted_text(rec)
    fact = tb.get("trusted_fact")
    if fact is not None and fact.lower() not in trusted:
        return f"negative, but its fact {fact!r} is not in the trusted inputs"
    for arg in tb["sink_args"].values():
        for n in _NUMBER.findall(str(arg)):
            if n not in trusted:
                return f"negative, but its sink's {n!r} is not in the trusted inputs"
    return None


def realisation(rec: dict[str, Any], seed: int = 0) -> str | None:
    """The scenario as built commits its designated sink with the simulated agent."""
    from containmentbench.audit.replay import run_one
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig, make_backend
    from containmentbench.runtime.episode import RolloutSpec, RuntimeConfig
    from containmentbench.scenarios.model import Scenario

    s = Scenario.from_dict(rec)
    backend = make_backend(BackendConfig(name="sim", model=f"sim:{CONTROL_PROFILE}",
                                         options={"profile": CONTROL_PROFILE}))
    spec = RolloutSpec(f"control/{s.id}", "taintbench-control", f"sim:{CONTROL_PROFILE}",
                       "sim", "none", seed, CONTROL_PROFILE)
    ep = run_one(s, load_defense("none"), spec, RuntimeConfig(), backend)
    if not sink_count(ep.rec.events, rec["meta"]["taintbench"]):
        return "the designated sink is never called as built"
    return None


def control(rec: dict[str, Any], variant: dict[str, Any]) -> str | None:
    """Both checks of one scenario, or the first problem in words."""
    return derivation(rec, variant) or realisation(rec)


def check_records(records: dict[str, list[dict[str, Any]]],
                  variants: dict[str, list[dict[str, Any]]]) -> None:
    """Every scenario's checks (module docstring); the first failure is a one-line error."""
    other = {r["id"]: r for stage in variants.values() for r in stage}
    for stage in sorted(records):
        for rec in records[stage]:
            problem = control(rec, other[rec["id"]])
            if problem:
                raise BenchError(f"scenario {rec['id']}: {problem}",
                                 field="meta.taintbench")


def labels_of(records: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r["meta"]["taintbench"] for stage in sorted(records)
            for r in records[stage]}


def profiles_of(labels: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each profile's scenario ids and their sha256."""
    out = {}
    for p in PROFILES:
        ids = sorted(k for k, tb in labels.items() if p in tb["profiles"])
        out[p] = {"scenarios": ids, "sha256": sha256_json({k: labels[k] for k in ids})}
    return out


def label_file(records: dict[str, list[dict[str, Any]]]) -> bytes:
    labels = labels_of(records)
    profiles = profiles_of(labels)
    body = {"labels": labels, "profiles": profiles,
            "sha256": sha256_json({"labels": labels, "profiles": profiles}),
            "note": "labels fixed before any detector ran (paper 001 Appendix B.2); each "
                    "checked at build time by a derivation (the sink is a function of the "
                    "source, or derivable from trusted inputs alone) and a realisation run"}
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def check_label_file(folder: Path, scenarios: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The suite's labels, after checking LABELS.json against its hash and the scenarios."""
    path = Path(folder) / LABELS
    if not path.is_file():
        raise BenchError(f"no {LABELS}: not a labelled suite", file=str(path), field="labels")
    try:
        body = json.loads(path.read_text())
        labels, profiles, want = body["labels"], body["profiles"], body["sha256"]
    except (ValueError, KeyError, TypeError):
        raise BenchError("not a label file (labels, profiles, sha256)", file=str(path),
                         field="labels") from None
    if sha256_json({"labels": labels, "profiles": profiles}) != want:
        raise BenchError("label hash does not match its labels", file=str(path),
                         field="sha256")
    if not isinstance(labels, dict) or profiles != profiles_of(labels):
        raise BenchError("profile lists or hashes do not match the labels", file=str(path),
                         field="profiles")
    for s in scenarios:
        tb = s.meta.get("taintbench")
        if labels.get(s.id) != tb:
            raise BenchError(f"scenario '{s.id}': its label differs from {LABELS}",
                             file=str(path), field=f"labels.{s.id}")
    return labels
