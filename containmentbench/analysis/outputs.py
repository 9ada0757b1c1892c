"""What an ``analyze`` run declares before it runs, without its heavy imports (polars,
matplotlib): the config keys each cached part reads and their digest (a Snakemake
``params`` value, so a bootstrap setting never reruns ``sensitivity`` and vice versa), and
the figures drawn for a study's evidence stages. The Snakefile reads these while it is
parsed, at every Snakemake start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from containmentbench.canonical import sha256_json

# The analysis-config keys each part reads (the rest feed the tables rule directly).
KEYS = {
    "sensitivity": ("stage_contribution", "sensitivity", "attribution"),
    "bootstrap": ("resamples", "confidence", "seed", "max_batch_elements", "comparisons",
                  "sweep", "divergence"),
}

#: the stage a figure needs: a study without it gets no such figure (never empty axes)
NEEDS = {"fig03_authorized_completion": "active_tainted",
         "fig06_memory_recovery": "memory_recovery"}


def settings_of(cfg: Mapping[str, Any], part: str) -> dict[str, Any]:
    """The config keys a part reads; ``tables``: every key, since figures resample too."""
    if part == "tables":
        return dict(cfg)
    return {k: cfg[k] for k in KEYS[part] if k in cfg}


def settings_digest(cfg: Mapping[str, Any], part: str) -> str:
    """sha256 of the config keys a part reads (a Snakemake ``params`` value)."""
    return sha256_json(plain(settings_of(cfg, part)))


def plain(x: Any) -> Any:
    """Mappings and sequences (OmegaConf's included) as plain dicts and lists."""
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def figure_names(stages: Sequence[str]) -> list[str]:
    """The figures ``analyze`` draws for a study with these evidence stages."""
    return [n for n in ("fig03_authorized_completion", "fig04_operating_points",
                        "fig05_boundary_vs_ledger", "fig06_memory_recovery")
            if NEEDS.get(n) is None or NEEDS[n] in stages]
