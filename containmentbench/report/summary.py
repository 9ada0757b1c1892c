"""The end of a run in the terminal: each model's verified headline and where its report is
(``containmentbench headline``, the Snakefile's ``onsuccess``, ``make run``).

A study that fails ``verify`` gets no headline, only a one-line error: the numbers printed
are always the frozen ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from containmentbench.errors import BenchError


def verified_doc(run: Path) -> dict:
    """``tables/headline.json`` of a frozen run that passes ``verify``, or a BenchError."""
    from containmentbench.freeze.manifest import require_verified

    path = run / "tables" / "headline.json"
    if not path.is_file():
        raise BenchError("no tables/headline.json (the study has not finished its tables, or "
                         "was analysed before headlines existed: rerun it)", file=str(run))
    if not (run / "MANIFEST.json").is_file():
        raise BenchError("no MANIFEST.json: the study is not frozen; no headline before "
                         "freeze and verify", file=str(run))
    require_verified(run)
    return json.loads(path.read_text())


def seeds_line(run: Path) -> str:
    """The seeds the run was made with (``study.seeds`` of its ``config.yaml``), as a line:
    a headline of one seed must not read as the study's full design."""
    from containmentbench.config.compose import read_resolved

    path = run / "config.yaml"
    if not path.is_file():
        return ""
    try:  # the headline is the frozen tables'; a config it cannot read costs only this line
        seeds = read_resolved(path)["study"].get("seeds") or []
    except BenchError:
        return ""
    n = len(seeds)
    return (f"seeds: {', '.join(map(str, seeds))} ({n} seed{'s' if n != 1 else ''} per "
            f"scenario and defense; study.seeds of {path})\n")


def throughput_line(run: Path) -> str:
    """The headline's footer: the study's throughput (its jobs pooled) from
    ``tables/throughput.parquet``, the frozen bytes only (``results.Study``); empty for a
    study without it. Printed here, never written into ``headline.md``: wall clock is not a
    frozen, byte-identical result (``pipeline/throughput.py``)."""
    from containmentbench.pipeline.throughput import line
    from containmentbench.results import Study

    t = Study(run).throughput
    if t is None or "job" not in t.columns:
        return ""
    study = t.filter(t["job"].is_null())
    if study.height == 0:
        return ""
    rec: dict[str, object] = dict(zip(study["metric"].to_list(), study["estimate"].to_list(),
                                      strict=True))
    rec["rollouts"] = int(rec.get("rollouts") or 0)
    rec["sim_agent"] = bool(study["sim_agent"].any())
    jobs = t.filter(t["job"].is_not_null())["job"].n_unique()
    return f"throughput (wall clock; {jobs} rollout job(s) pooled): {line(rec)}\n"


def run_text(run: Path) -> str:
    """The headline as text, the seeds of the run, its throughput (the footer), then the
    report's path."""
    from containmentbench.analysis.headline import text

    doc = verified_doc(run)
    report = run / "report" / "index.html"
    tail = f"report: {report.resolve()}\n" if report.is_file() else ""
    head, _, body = text(doc).partition("\n")  # the seeds right under "study NAME"
    return f"{head}\n{seeds_line(run)}{body}{throughput_line(run)}{tail}"


def study_text(runs: list[Path], cross: Path | None) -> str:
    """Every model's headline (a run that is not finished or fails verify: its one-line
    reason), then the cross-model comparison."""
    parts = []
    for run in runs:
        try:
            parts.append(run_text(run))
        except BenchError as exc:
            parts.append(f"containmentbench: no headline: {exc.render()}\n")
    if cross is not None and (cross / "tables" / "headline.json").is_file():
        from containmentbench.analysis.cross_model import cross_text

        parts.append(cross_text(cross))
    return "\n".join(parts)
