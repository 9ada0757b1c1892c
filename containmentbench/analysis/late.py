"""The tables other steps of a study write before its results table: the case studies and
Table 28 (``cases``, paper 000 Appendix D and L), AgentDojo's Table 20 (``adapters
table20``, Appendix C) and the provenance audit's tables (``audit run``, paper 001,
``audit/tables/``). The pipeline runs those steps first, so that ``tables/results.parquet``
holds every number of every table (issue 35); each is read back here from its Parquet file,
its caption from the file's metadata. An audit table is named ``audit/<stem>`` (its
``source_table`` in results.parquet) so that it is never confused with a table of
``tables/``; its wall-clock tables (``audit/summary.json``'s ``wall_clock``, measurements of
the machine) are kept out, as the analysis's own hook time is.

A step that has not run leaves no file, and its tables are then not in the results (an
``analyze --out`` elsewhere has none; ``reproduce`` writes them into its scratch folder
before it analyzes, as the pipeline does).
"""

from __future__ import annotations

import json
from pathlib import Path

from containmentbench.analysis.writers import Table, read
from containmentbench.integrity import safeopen

#: tables/ files written by steps that run before the results table (in this order)
LATE = ("case_studies", "table28_integrity_audit", "table20_agentdojo_qualification")
AUDIT = "audit/"


def _read(path: Path, name: str) -> Table:
    safeopen.check_regular(path, what="table", follow=False)
    return read(path, name)


def _audit_wall_clock(run: Path) -> set[str]:
    p = run / "audit" / "summary.json"
    if not p.is_file():
        return set()
    raw = safeopen.read_bytes(p, limit=safeopen.LIMIT_JSON, what="audit summary",
                              follow=False)
    return {Path(rel).stem for rel in json.loads(raw).get("wall_clock", [])}


def late_tables(run: str | Path) -> list[Table]:
    """The case-study, Table 28, Table 20 and audit tables found under ``run``."""
    run = Path(run)
    out = [_read(run / "tables" / f"{n}.parquet", n) for n in LATE
           if (run / "tables" / f"{n}.parquet").exists()]
    folder = run / "audit" / "tables"
    if folder.is_dir():
        skip = _audit_wall_clock(run)
        out += [_read(p, AUDIT + p.stem) for p in sorted(folder.glob("*.parquet"))
                if p.stem not in skip]
    return out


def table_path(run: str | Path, name: str) -> Path:
    """The Parquet file of a results.parquet ``source_table``."""
    run = Path(run)
    if name.startswith(AUDIT):
        return run / "audit" / "tables" / f"{name[len(AUDIT):]}.parquet"
    p = run / "tables" / f"{name}.parquet"
    return p if p.exists() else run / "figures" / f"{name}.parquet"
