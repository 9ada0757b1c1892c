"""Every step of a run's chain with its state, for ``containmentbench status``.

The steps are the rules of the study's kind (``Snakefile``): our scenarios go rollouts ->
reparse -> metrics -> analysis (sensitivity, bootstrap), cases and audit -> tables (whose
results.parquet holds the case studies' and the audit's numbers too) -> report -> freeze; an AgentDojo study goes qualification -> rollouts -> metrics -> parity -> tables ->
report -> freeze; an adaptive study goes splits -> search -> frozen candidates ->
qualification -> replay -> metrics -> tables -> report -> freeze. A step is

* ``done``: its output exists and is not older than the outputs of the steps before it;
* ``outdated``: its output exists but an earlier step's output is newer (the next run redoes
  it, as Snakemake's modification-time trigger does);
* ``pending``: no output yet.

Rollouts are done when every planned shard is (``pipeline/status.py``); ``freeze`` is done
when ``MANIFEST.json`` exists and is newer than every output before it (``verify`` checks
the bytes). This reads modification times only: a quick answer, not a dry run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: (step, outputs relative to the run directory, the steps it reads) per kind of study, in
#: chain order (the Snakefile's rules; "rollouts" is the shards)
R = ("rollouts",)
OURS = (("reparse", ("reparse/summary.json",), R),
        ("metrics", ("metrics/rollout_metrics.parquet",), R),
        ("analysis", ("analysis/sensitivity.json", "analysis/bootstrap.json"), ("metrics",)),
        ("cases", ("tables/case_studies_steps.json",), ("metrics",)),
        ("audit", ("audit/summary.json",), R),
        ("tables", ("analysis.json", "tables/headline.json"),
         ("reparse", "analysis", "cases", "audit")),
        ("report", ("report/index.html",), ("tables",)),
        ("freeze", ("MANIFEST.json",), ("report",)))
ADAPTER = (("metrics", ("metrics/rollout_metrics.parquet",), R),
           ("parity", ("adapter/parity.json",), R),
           ("tables", ("analysis.json", "tables/headline.json"), ("metrics", "parity")),
           ("report", ("report/index.html",), ("tables",)),
           ("freeze", ("MANIFEST.json",), ("report",)))
ADAPTIVE = (("splits", ("adaptive/splits.json",), ()),
            ("search", ("adaptive/search/candidates.json",), ("splits",)),
            ("frozen candidates", ("adaptive/frozen/candidates_manifest.json",), ("search",)),
            ("qualification", ("adaptive/qualification/qualification.json",),
             ("frozen candidates",)),
            ("replay", ("adaptive/replay.done",), ("qualification",)),
            ("metrics", ("metrics/rollout_metrics.parquet",), ("replay",)),
            ("tables", ("tables/table18_candidate_transfer.csv", "tables/headline.json"),
             ("metrics",)),
            ("report", ("report/index.html",), ("tables",)),
            ("freeze", ("MANIFEST.json",), ("report",)))


def _mtime(p: Path) -> float | None:
    try:
        return p.stat().st_mtime
    except OSError:
        return None


def steps_of(data: dict[str, Any]) -> Sequence[tuple[str, Sequence[str], Sequence[str]]]:
    study = data["study"]
    if (study.get("adaptive") or {}).get("enabled"):
        return ADAPTIVE
    if (study.get("adapter") or {}).get("name"):
        return ADAPTER
    return OURS


def chain(data: dict[str, Any], shards: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """(step, state, detail) for every step, rollouts first. ``shards``: the shard states
    of ``pipeline.status.study_status``."""
    from containmentbench.pipeline.plan import run_dir

    root = run_dir(data)
    total = sum(len(v) for k, v in shards.items() if k != "dropped")
    done = len(shards.get("done", []))
    adaptive = steps_of(data) is ADAPTIVE
    out = [] if adaptive else [("rollouts", "done" if total and done == total else "pending",
                                f"{done} of {total} shards done")]
    # the newest output of each step that is done (None: pending or outdated, so every step
    # after it is outdated too)
    newest: dict[str, float | None] = {"rollouts": max(
        (_mtime(root / "traces" / s / "SHA256SUMS") or 0.0 for s in shards.get("done", [])),
        default=0.0) if total and done == total else None}
    for step, outputs, deps in steps_of(data):
        times = [_mtime(root / o) for o in outputs]
        if any(t is None for t in times):
            missing = next(o for o, t in zip(outputs, times, strict=True) if t is None)
            out.append((step, "pending", f"no {missing}"))
            newest[step] = None
            continue
        before = [newest.get(d) for d in deps]
        oldest = min(t for t in times if t is not None)
        stale = any(b is None or b > oldest for b in before)
        out.append((step, "outdated" if stale else "done", ", ".join(outputs)
                    + (" (an input is newer, pending or outdated: the next run redoes it)"
                       if stale else "")))
        newest[step] = None if stale else max(t for t in times if t is not None)
    return out
