"""Locating and reading the Hydra config tree (``config/``) outside a Hydra app.

The Compose API (:mod:`containmentbench.config.compose`) is the main entry point; this module
holds the small pieces other packages need without composing a whole study.
"""

from __future__ import annotations

import copy
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError


def config_dir() -> Path:
    """``$CONTAINMENTBENCH_CONFIG``, ``./config`` or the tree beside the package."""
    cands = []
    if os.environ.get("CONTAINMENTBENCH_CONFIG"):
        cands.append(Path(os.environ["CONTAINMENTBENCH_CONFIG"]))
    cands += [Path.cwd() / "config", Path(__file__).resolve().parents[2] / "config"]
    for c in cands:
        if (c / "defenses").is_dir():
            return c.resolve()
    raise BenchError(f"config tree not found (looked in {', '.join(map(str, cands))})",
                     field="config")


def load_defenses(directory: Path | None = None, option: str = "builtin") -> dict[str, Any]:
    """The defense configurations of one ``defenses`` group option, by name."""
    return copy.deepcopy(_load_defenses(directory or config_dir(), option))


@lru_cache(maxsize=16)
def _load_defenses(directory: Path, option: str) -> dict[str, Any]:
    d = directory / "defenses" / f"{option}.yaml"
    if not d.exists():
        raise BenchError(f"no defenses option '{option}'", file=str(d), field="defenses")
    from omegaconf import OmegaConf  # not at module level: rollout jobs import this module

    cfg = OmegaConf.to_container(OmegaConf.load(d), resolve=True)
    return cfg


def load_option(group: str, option: str = "default", directory: Path | None = None
                ) -> dict[str, Any]:
    """One option of a config group as a plain dict (``config/<group>/<option>.yaml``), or a
    YAML file path given directly. Malformed YAML, anything but a mapping, and (for the
    ``analysis`` group, which ``analyze --analysis FILE`` reads outside composition) a
    missing, mistyped or unknown key are one line naming the file."""
    p = Path(option)
    if p.suffix not in (".yaml", ".yml"):
        p = (directory or config_dir()) / group / f"{option}.yaml"
    if not p.is_file():
        raise BenchError(f"no {group} option '{option}'", file=str(p), field=group)
    from omegaconf import OmegaConf

    from containmentbench.integrity.inputs import read_yaml_mapping

    raw = read_yaml_mapping(p, f"a {group} option")
    try:  # through OmegaConf: option files may use interpolation
        data = OmegaConf.to_container(OmegaConf.create(raw), resolve=True)
    except Exception as exc:  # an interpolation that does not resolve
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise BenchError(f"not a valid {group} option ({reason})", file=str(p)) from None
    if group == "analysis":
        from containmentbench.config.keys import check_analysis

        check_analysis(data, file=str(p))
    return data
