"""Run folders written before ownership records existed (integrity/writer.py): the pre-flight
adopts a run folder whose ``config.yaml`` names this study and model, recording which kind of
output wrote each file by where it lies, so a rerun can rebuild its own outputs there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from containmentbench.integrity import writer

# (path prefix or name, kind): first match wins
_KINDS = (("MANIFEST.json", "manifest"), ("config.yaml", "config"), ("plan.json", "plan"),
          ("analysis.json", "analysis"), ("analysis/sensitivity.json", "sensitivity"),
          ("analysis/bootstrap.json", "bootstrap"), ("metrics/", "metrics"),
          ("reparse/", "reparse"), ("audit/tables/", "tables"), ("audit/", "audit"),
          ("tables/", "tables"), ("figures/", "figures"), ("jobs/", "job-marker"),
          ("logs/rollout/", "job-log"), ("logs/errored/", "errored-record"))


def kind_for(rel: str) -> str | None:
    for prefix, kind in _KINDS:
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            if kind == "figures" and not rel.endswith((".png", ".pdf")):
                return "tables"  # a figure's source table
            return kind
    return None


def adopt_run(run: Path, data: dict[str, Any]) -> int:
    """Adopt ``run`` when it has no record and its config names this study and model."""
    from containmentbench.config.compose import read_resolved

    run = Path(run)
    if not (run / "config.yaml").is_file() or writer.kind_of(run) is not None:
        return 0
    try:
        old = read_resolved(run / "config.yaml")
    except Exception:  # unreadable: not adopted (analyze then refuses the folder, one line)
        return 0
    if (old.get("study") or {}).get("name") != data["study"]["name"] or \
            (old.get("model") or {}).get("name") != data["model"]["name"]:
        return 0
    owners = {}
    for p in sorted(run.rglob("*")):
        rel = p.relative_to(run).as_posix()
        if p.is_file() and not any(part.startswith(".") for part in rel.split("/")) \
                and (kind := kind_for(rel)) is not None:
            owners[rel] = kind
    return writer.adopt_legacy(run, "run", owners)
