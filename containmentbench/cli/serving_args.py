"""``--differ-in KEY[,KEY]``: the serving record keys in which the runs a verb compares may
differ (models/serving.py). ``cross-model`` and ``compare`` refuse runs served differently
in any other key, naming each key with both values."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError


def add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--differ-in", action="append", default=[], metavar="KEY[,KEY]",
                   help="serving record keys in which the runs may differ, because that is "
                        "the point (engine, engine_version, tool_parser, chat_template_sha256, "
                        "quantization, decoding, tool_mode)")


def keys(values: list[str]) -> list[str]:
    """The keys of every ``--differ-in`` value, in order, each once."""
    out = [k.strip() for v in values for k in v.split(",") if k.strip()]
    return list(dict.fromkeys(out))


def run_record(run: Path) -> dict[str, Any]:
    """The serving record of a run directory, from its resolved ``config.yaml``."""
    from containmentbench.config.compose import read_resolved
    from containmentbench.models.serving import record

    cfg = run / "config.yaml"
    if not cfg.is_file():
        raise BenchError("no config.yaml: its serving record is unknown (is it a run "
                         "directory?)", file=str(run))
    return record(read_resolved(cfg))


def check_runs(runs: list[Path], differ_in: list[str]) -> list[str]:
    """Refuse ``runs`` served differently in a key ``differ_in`` does not name; returns the
    declared keys that differ."""
    from containmentbench.models.serving import check_alike

    if len(runs) < 2:
        return []
    from containmentbench.config.compose import read_resolved

    # the study's own declaration (study.differ_in, which its config check applied) counts
    study = read_resolved(runs[0] / "config.yaml")["study"] \
        if (runs[0] / "config.yaml").is_file() else {}
    differ_in = [*differ_in, *(k for k in study.get("differ_in") or [] if k not in differ_in)]
    labels = [r.name if [x.name for x in runs].count(r.name) == 1 else str(r) for r in runs]
    return check_alike([(lab, run_record(r)) for lab, r in zip(labels, runs, strict=True)],
                       differ_in, "--differ-in {}", "--differ-in")
