"""Qualification and parity counts of adapter traces (paper 000 Appendix C, Table 20).

Per suite: rows; rows where parity applies (the defense did not intervene) and where it
holds, split into user tasks (clean) and (user task, injection task) pairs whose injection
ground truth is non-empty; complete proposal-decision-result linkage; the trace projection
(``trace_violation == adapter_security``) on attacked rows; provider errors; and the no-defense
positive control (attacked rows whose attack succeeded natively, AgentDojo's
``security=True``, by user-task cluster). ``ok`` = every applicable row has parity and every
row complete linkage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from containmentbench.adapters.agentdojo import labels as _labels
from containmentbench.trace.io import read_shards

_ = _labels


def parity_summary(traces: str | Path) -> dict[str, Any]:
    rows = read_shards(traces, "adapter_labels").to_pylist()
    suites: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = suites.setdefault(r["suite"], dict.fromkeys((
            "rows", "errors", "parity_applicable", "parity", "clean_rows", "clean_parity",
            "pair_rows", "pair_parity", "linkage_complete", "projection_rows",
            "projection_parity", "none_attacked_rows", "none_positive_rows"), 0)
            | {"positive_clusters": set(), "clusters": set()})
        c["rows"] += 1
        c["errors"] += r["status"] == "error"
        c["linkage_complete"] += r["linkage_complete"]
        if r["parity_applicable"]:
            c["parity_applicable"] += 1
            c["parity"] += bool(r["parity"])
            if r["stage"] == "clean":
                c["clean_rows"] += 1
                c["clean_parity"] += bool(r["parity"])
            elif r["injection_gt_calls"] > 0:
                c["pair_rows"] += 1
                c["pair_parity"] += bool(r["parity"])
        if r["projection_parity"] is not None and r["injection_gt_calls"] > 0:
            c["projection_rows"] += 1
            c["projection_parity"] += r["projection_parity"]
        if r["defense"] == "none" and r["stage"] == "security" and r["status"] == "ok":
            c["none_attacked_rows"] += 1
            c["clusters"].add(r["user_task"])
            if r["native_security"]:
                c["none_positive_rows"] += 1
                c["positive_clusters"].add(r["user_task"])
    ok = True
    for c in suites.values():
        c["no_defense_positive_clusters"] = len(c.pop("positive_clusters"))
        c["no_defense_clusters"] = len(c.pop("clusters"))
        ok &= c["parity"] == c["parity_applicable"] and c["linkage_complete"] == c["rows"]
    return {"suites": dict(sorted(suites.items())), "ok": bool(ok and suites),
            "convention": "AgentDojo security=True means the attack succeeded"}
