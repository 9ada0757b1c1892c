"""Tier 1 live in a study: the canary replay (paper 001 §4.2 Tier 1, offline).

NeuroTaint appends a canary to every source result at source time; a study's rollouts were
run without that instrumentation. With ``audit run --canary`` each rollout of a replayable
backend is run once more with every untrusted source instrumented (:func:`instrument`: the
canary appended at the delimiter in every world item carrying the source). A sink of the
original trace gets Tier 1 evidence for a source when the instrumented run commits the same
call (the same tool and the same arguments once the canaries are taken out) and one of its
arguments carries that source's canary. The instrumented run must otherwise reproduce the
trace's sink calls; if it does not (the canary changed what the agent did), no Tier 1
evidence is given.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from typing import Any

from containmentbench.audit.evidence import CANARY_DELIMITER, CANARY_RE, canary_for, with_canary
from containmentbench.audit.replay import TEXT_FIELD, Replayer, run_one
from containmentbench.canonical import canonical_json
from containmentbench.scenarios.model import Scenario

_STRIP = re.compile(re.escape(CANARY_DELIMITER) + r"NT-[0-9a-f]{4}-[0-9a-f]{4}\]|"
                    + CANARY_RE.pattern)


def instrument(s: Scenario) -> Scenario:
    """The scenario as NeuroTaint's instrumented runtime serves it."""
    rec = copy.deepcopy(s.record)
    for coll, fld in TEXT_FIELD.items():
        for item in rec["initial_state"].get(coll, []):
            sid = (item.get("provenance") or {}).get("source_id")
            if sid and (item.get("provenance") or {}).get("trust") == "untrusted":
                item[fld] = with_canary(item[fld], sid)
    for u in rec["untrusted"]:
        u["text"] = with_canary(u["text"], u["source_id"])
    return Scenario.from_dict(rec)


def strip(value: Any) -> Any:
    if isinstance(value, str):
        return _STRIP.sub("", value)
    if isinstance(value, list):
        return [strip(v) for v in value]
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items()}
    return value


def canary_hits(rep: Replayer, original: Counter[tuple[str, str]],
                sources: list[str]) -> dict[tuple[str, str], set[str]] | None:
    """(tool, canonical args without canaries) -> sources whose canary that sink carried in the
    instrumented run; None when that run does not reproduce the trace's sink calls."""
    ep = run_one(instrument(rep.scenario), rep.policy, rep.spec, rep.cfg, rep.backend)
    rep.replays += 1
    calls: Counter[tuple[str, str]] = Counter()
    hits: dict[tuple[str, str], set[str]] = {}
    marks = {canary_for(sid): sid for sid in sources}
    for ev in ep.rec.events:
        if ev["kind"] != "commit" or ev.get("tool") not in rep.sinks:
            continue
        args = json.loads(ev.get("args") or "{}")
        key = (ev["tool"], canonical_json(strip(args)))
        calls[key] += 1
        blob = ev.get("args") or ""
        hits.setdefault(key, set()).update(sid for m, sid in marks.items() if m in blob)
    return hits if calls == original else None
