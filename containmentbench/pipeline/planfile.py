"""The resolved plan beside the resolved config: ``<run dir>/plan.json``.

Every rollout job is a fresh process that needs its shards' scenario ids. Deriving them means
reading every stage file of the suite (504 records for full_main) and the YAML config, which
cost more than a short shard's own work. The Snakefile pre-flight, which plans the study
anyway, writes the plan once: the resolved config as JSON and every shard's scenario ids.

The file is a cache, never a source of truth: a job uses it only when it was written for the
exact bytes of the ``config.yaml`` it was given and for the exact suite manifest on disk;
otherwise it plans afresh from the suite (the result is the same, only slower). A dry run
does not write it (``pipeline.snake``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from containmentbench.integrity import writer
from containmentbench.pipeline.plan import Shard

PLAN_FILE = "plan.json"
FORMAT = 1


def _sha256_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _suite_manifest(data: dict[str, Any]) -> Path | None:
    from containmentbench.errors import BenchError
    from containmentbench.scenarios.manifest import MANIFEST, suite_dir

    try:
        return suite_dir(data["study"]["suite"]) / MANIFEST
    except BenchError:
        return None


def plan_record(data: dict[str, Any], config_path: Path, shards: list[Shard]) -> dict[str, Any]:
    """The JSON record: keys that tie it to one config file and one suite, the config, and the
    shards (scenario id blocks are stored once per stage and index: every defense and seed of
    a block runs the same scenarios)."""
    manifest = _suite_manifest(data)
    blocks: dict[str, list[list[str]]] = {}
    rows = []
    for s in shards:
        per = blocks.setdefault(s.stage, [])
        while len(per) <= s.index:
            per.append([])
        if not per[s.index]:
            per[s.index] = list(s.scenario_ids)
        elif per[s.index] != list(s.scenario_ids):  # not a block shape: store it whole
            rows.append([s.model, s.defense, s.seed, s.stage, s.index, list(s.scenario_ids)])
            continue
        rows.append([s.model, s.defense, s.seed, s.stage, s.index, None])
    from containmentbench.config.compose import portable

    # the config as its file records it (no results_dir for a config in its run directory:
    # read_plan places it as read_resolved does, so a copied study finds its own folder)
    return {"format": FORMAT, "config_sha256": _sha256_file(config_path),
            "suite_sha256": _suite_key(manifest), "config": portable(data, config_path),
            "blocks": blocks,
            "shards": rows, "sim_profile": _sim_profile(data)}


def _sim_profile(data: dict[str, Any]) -> dict[str, Any] | None:
    """A packaged sim profile, parsed (a job then needs no YAML parser for it)."""
    name = (data.get("model") or {}).get("sim_profile")
    if data.get("backend", {}).get("name") != "sim" or not isinstance(name, str) \
            or name.endswith((".yaml", ".yml")):
        return None
    from containmentbench.models.sim import packaged_profiles, packaged_sha256

    mapping = packaged_profiles().get(name)
    if mapping is None or json.loads(json.dumps(mapping)) != mapping:
        return None
    return {"name": name, "sha256": packaged_sha256(), "mapping": mapping}


def _suite_key(manifest: Path | None) -> dict[str, Any] | None:
    """sha256 of the suite manifest, and each stage file's size, mtime and inode (the
    signature the per-process suite cache uses, scenarios/manifest.py): a stage file edited
    or regenerated without a new manifest makes the plan stale. A job validates each of its
    scenarios anyway, and the ``scenarios`` rule checks every stage file's sha256 first."""
    if manifest is None:
        return None
    out: dict[str, Any] = {manifest.name: _sha256_file(manifest)}
    for p in sorted(manifest.parent.glob("*.jsonl")):
        st = p.stat()
        out[p.name] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return out


def save_plan(data: dict[str, Any], config_path: Path, shards: list[Shard]) -> bool:
    """Write ``plan.json`` beside ``config_path`` when its content changes (atomic). The config
    stored is the one a job would read from ``config_path``; a config that JSON cannot carry
    unchanged gets no plan (jobs then read the YAML)."""
    from containmentbench.config.compose import read_resolved

    path = Path(config_path).with_name(PLAN_FILE)
    data = read_resolved(config_path)
    if json.loads(json.dumps(data)) != data:
        writer.remove_owned(path, "plan")
        return False
    # insertion order kept (no sort_keys): the config as read from its YAML and a sim
    # profile's weights come back in the order they were written, which the sim's seeded
    # choices depend on
    text = json.dumps(plan_record(data, Path(config_path), shards),
                      separators=(",", ":")) + "\n"
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    writer.write_text(path, text, kind="plan", sync=False)
    return True


def read_plan(config_path: str | Path) -> tuple[dict[str, Any], list[Shard]] | None:
    """``(resolved config, shards)`` from the plan beside ``config_path``, or None when there
    is none or it does not belong to these exact config and suite bytes. A packaged sim
    profile stored in the plan is handed to the sim backend (used while its file is
    unchanged)."""
    config_path = Path(config_path)
    try:
        rec = json.loads(config_path.with_name(PLAN_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        return None
    if rec.get("config_sha256") != _sha256_file(config_path):
        return None
    data = rec.get("config")
    if not isinstance(data, dict):
        return None
    if "results_dir" not in data:
        from containmentbench.config.compose import results_dir_of
        from containmentbench.errors import BenchError

        try:
            data["results_dir"] = results_dir_of(config_path, data)
        except (BenchError, KeyError, TypeError):
            return None
    manifest = _suite_manifest(data)
    if manifest is None or rec.get("suite_sha256") != _suite_key(manifest):
        return None
    prof = rec.get("sim_profile")
    if isinstance(prof, dict) and isinstance(prof.get("mapping"), dict):
        from containmentbench.models.sim import prime_profile

        prime_profile(str(prof.get("name")), prof["mapping"], str(prof.get("sha256")))
    try:
        blocks = rec["blocks"]
        out = [Shard(m, d, int(seed), st, int(k), tuple(ids if ids is not None
                                                        else blocks[st][k]))
               for m, d, seed, st, k, ids in rec["shards"]]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return data, out
