"""What a study's keys hash besides its settings: the content it reads and the code that
computes on it.

A key that holds a name or a path instead of what the name stands for lets a study change
meaning silently: an edited sim profile file or a regenerated suite left every shard
``done``, and a new metric definition left every metrics table in place. The digests here
go into the shard key and the run key (``pipeline/plan.py``) and into the ``params`` of the
metrics and analysis rules (``pipeline/snake.py``), so a change of content or code redoes
what it changes and nothing else:

* :func:`scenario_digest`: the sha256 of each of a shard's scenarios, from the suite
  manifest (``scenarios/<suite>/MANIFEST.json`` records one per scenario);
* :func:`sim_profile_digest`: the sim agent's profile as parsed (a packaged profile or a
  YAML file), in file order (the sim's seeded choices follow that order);
* :func:`code_digest`: the source bytes of a module and of every ``containmentbench``
  module it imports, transitively (the layer's code version: any edit that could change
  what it computes reruns it; an edit elsewhere does not).

Each digest is cached per process by the file signature (size, mtime, inode) of what it
read, so planning 140 shards reads the manifest once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PACKAGE = "containmentbench"


def _signature(path: Path) -> tuple[str, int, int, int]:
    st = path.stat()
    return str(path), st.st_size, st.st_mtime_ns, st.st_ino


@functools.lru_cache(maxsize=32)
def _manifest_hashes(sig: tuple[str, int, int, int]) -> dict[str, str]:
    from containmentbench.scenarios.manifest import read_manifest

    return dict(read_manifest(Path(sig[0]).parent)["scenarios"])


def scenario_digest(data: dict[str, Any], ids: Sequence[str]) -> str | None:
    """sha256 over the manifest hashes of ``ids`` in the study's suite; None for a study
    over an external benchmark (its tasks are pinned by the adapter's package version)."""
    from containmentbench.errors import BenchError
    from containmentbench.scenarios.manifest import MANIFEST, suite_dir

    if (data["study"].get("adapter") or {}).get("name"):
        return None
    try:
        manifest = suite_dir(data["study"]["suite"]) / MANIFEST
        hashes = _manifest_hashes(_signature(manifest))
    except (BenchError, OSError):
        return None  # no manifest: the planner and the scenarios rule report the suite
    missing = [i for i in ids if i not in hashes]
    if missing:
        raise BenchError(f"scenario '{missing[0]}' has no hash in the suite manifest",
                         file=str(manifest))
    return hashlib.sha256("\n".join(hashes[i] for i in ids).encode()).hexdigest()


@functools.lru_cache(maxsize=32)
def _profile_digest(name: str, sig: tuple[str, int, int, int]) -> str:
    if Path(name).suffix in (".yaml", ".yml"):
        from omegaconf import OmegaConf  # profile files may use interpolation

        mapping = OmegaConf.to_container(OmegaConf.load(sig[0]), resolve=True)
    else:
        from containmentbench.models.sim import packaged_profiles

        mapping = packaged_profiles().get(name)
    # insertion order kept (no sort_keys): reordered weights change the sim's choices
    return hashlib.sha256(json.dumps(mapping).encode()).hexdigest()


def sim_profile_digest(data: dict[str, Any]) -> str | None:
    """sha256 of the sim profile a sim run uses, as parsed; None for other backends."""
    if data["backend"]["name"] != "sim":
        return None
    name = str(data["model"]["sim_profile"])
    if Path(name).suffix in (".yaml", ".yml"):
        path = Path(os.path.expanduser(name))
    else:
        from importlib import resources

        path = Path(str(resources.files("containmentbench.models")
                        .joinpath("sim_profiles.yaml")))
    try:
        sig = _signature(path)
    except OSError:
        from containmentbench.errors import BenchError

        raise BenchError("sim profile file not found", file=str(path),
                         field="model.sim_profile") from None
    return _profile_digest(name, sig)


def code_files(*modules: str) -> dict[str, bytes]:
    """The source of ``modules`` and of their ``containmentbench`` imports, transitively:
    package-relative path -> bytes."""
    from containmentbench.sources import closure

    return closure(Path(__file__).resolve().parents[1], PACKAGE, modules)


@functools.lru_cache(maxsize=16)
def code_digest(*modules: str) -> str:
    """sha256 over :func:`code_files` of ``modules`` (the layer's code version)."""
    from containmentbench.sources import digest

    return digest(code_files(*modules))
