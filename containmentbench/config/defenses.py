"""A study's defenses: a user's defenses file, stacks, the ablation grid, and the check
that every defense the study names can be built.

* ``defenses_file=path/to/mine.yaml`` (an override like any other, so Snakemake's
  ``--config``, ``status``, ``config check`` and ``slurm/submit.py`` take it alike) names
  defenses of one's own, each a mapping::

      my_guard:
        impl: guard.py:MyGuard        # file.py:Class (relative to this file) or module:Class
        method_version: "0.3"
        family: detector
        params: {threshold: 0.5}

  Its defenses join the study's list, after the study's own. A name the ``defenses`` group
  already configures is refused (two defenses under one name).
* ``study.defenses`` may name a stack ``a+b+c``: the layers run in that order
  (``defense/host.py``); ``study.ablation=true`` adds each stack's ablation grid (every layer
  alone and every leave-one-out stack).
* Every defense the study names is imported, built and checked here, so a defense that
  cannot be imported, names an unknown hook or assumes knowledge the study's suite cannot
  give fails ``config check`` (and every verb) with one line naming it, before any job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

ENTRY_KEYS = ("name", "impl", "method_version", "family", "prompt_guidance", "params")


def read_defenses_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """A user's defenses file: entries checked, ``impl`` paths made absolute."""
    from containmentbench.integrity.inputs import read_yaml_mapping
    from containmentbench.integrity.paths import check_name

    p = Path(path).expanduser()
    raw = read_yaml_mapping(p, "a defenses file")
    out: dict[str, dict[str, Any]] = {}
    for key, entry in raw.items():
        key = str(key)
        try:
            check_name(key, key)
        except BenchError as exc:
            raise BenchError(f"defense name {key!r}: {exc.detail}", file=str(p),
                             field=key) from None
        if "+" in key:
            raise BenchError("a defense name may not contain '+' (it joins stack layers)",
                             file=str(p), field=key)
        if not isinstance(entry, dict):
            raise BenchError("expected a mapping (impl, method_version, family, params, ...)",
                             file=str(p), field=key)
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise BenchError(f"unknown key (known: {', '.join(ENTRY_KEYS)})", file=str(p),
                             field=f"{key}.{unknown[0]}")
        e = {k: entry[k] for k in ENTRY_KEYS if k in entry}
        if not e.get("impl") and not e.get("name"):
            raise BenchError("needs impl: file.py:Class or module:Class (or name: a "
                             "registered defense)", file=str(p), field=key)
        for k in ("name", "impl", "method_version", "family"):
            if k in e and not isinstance(e[k], (str, int, float)):
                raise BenchError("must be text", file=str(p), field=f"{key}.{k}")
        if "params" in e and not isinstance(e["params"] or {}, dict):
            raise BenchError("must be a mapping", file=str(p), field=f"{key}.params")
        impl = str(e.get("impl") or "")
        if impl:
            target, sep, cls = impl.rpartition(":")
            if not sep or not cls or not target:
                raise BenchError(f"impl '{impl}' must be file.py:Class or module:Class",
                                 file=str(p), field=f"{key}.impl")
            if target.endswith(".py"):
                f = Path(target).expanduser()
                f = f if f.is_absolute() else (p.parent / f)
                impl = f"{f.resolve()}:{cls}"
        out[key] = {"name": str(e.get("name") or key), **({"impl": impl} if impl else {}),
                    "method_version": str(e.get("method_version", "0")),
                    "family": str(e.get("family", e.get("name") or key)),
                    "prompt_guidance": e.get("prompt_guidance"),
                    "params": dict(e.get("params") or {})}
    return out


def resolve_defenses(data: dict[str, Any]) -> None:
    """Merge a defenses file, expand the ablation grid, check stacks, and build every
    defense the study names (in place, on the resolved config)."""
    from containmentbench.defense.registry import ablation, split_stack

    study = data["study"]
    extra = data.get("defenses_file")
    if extra:
        mine = read_defenses_file(extra)
        for key, entry in mine.items():
            if key in data["defenses"]:
                raise BenchError(f"defense '{key}' is configured twice (the defenses group "
                                 f"and this file); rename one", file=str(extra), field=key)
            data["defenses"][key] = entry
        study["defenses"] = [*study["defenses"],
                             *(k for k in mine if k not in study["defenses"])]
    if study.get("ablation"):
        study["defenses"] = ablation(study["defenses"])
    for i, label in enumerate(study["defenses"]):
        try:
            parts = split_stack(label)
        except BenchError as exc:
            raise BenchError(exc.detail, field=f"study.defenses[{i}]") from None
        for part in parts:
            if part not in data["defenses"]:
                raise BenchError(f"defense '{part}' has no configuration in the defenses "
                                 f"group (containmentbench list defenses; a defense of your "
                                 f"own: defenses_file=..., docs/defenses.md)",
                                 field=f"study.defenses[{i}]")
    check_buildable(data)


def check_buildable(data: dict[str, Any]) -> None:
    """Import and build every layer the study names, and check that its suite can give
    each one the knowledge it assumes (one line naming the defense otherwise)."""
    from containmentbench.defense.registry import build, split_stack

    adapter = (data["study"].get("adapter") or {})
    served = not (adapter.get("name") and adapter.get("pipeline", "ground_truth")
                  == "ground_truth")
    seen: set[str] = set()
    for label in data["study"]["defenses"]:
        for part in split_stack(label):
            if part in seen:
                continue
            seen.add(part)
            d = build(part, data["defenses"][part])
            if "model" in d.assumes and not served:
                raise BenchError(f"defense '{part}' assumes a model, but the AgentDojo "
                                 f"ground-truth pipeline serves none (use a served model: "
                                 f"study.adapter.pipeline=backend)", field=f"defenses.{part}")
