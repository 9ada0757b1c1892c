"""Where defenses come from, and building one from its configuration.

A defense is found in one of three places, the same way for the project's own defenses and
for a user's (lm-eval and inspect_ai find plugins through entry points; here a plain file
works too):

* the entry point group ``containmentbench.defenses`` of an installed distribution
  (``[project.entry-points."containmentbench.defenses"] mine = "mypkg.guard:Guard"``); the
  project declares its own defenses there (origin ``built-in``);
* ``impl: module:Class`` in a defense's configuration (the module is importable);
* ``impl: path/to/file.py:Class`` in a user's defenses file (``defenses_file=...``), a path
  relative to that file; the file's folder goes on ``sys.path`` so it may import its
  neighbours.

The registry is lazy: nothing is imported until a study names a defense. A name two
distributions register is refused when it is used, naming both.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from containmentbench.defense.api import (
    Defense,
    DefenseConfig,
    DefenseError,
    check_assumptions,
    check_class,
)

GROUP = "containmentbench.defenses"
STACK_SEP = "+"

#: the project's own defenses: the same table ``pyproject.toml`` declares as entry points
#: (used when the package runs from a source tree without its metadata; a test checks that
#: the two agree)
BUILTIN = {
    "none": "containmentbench.defense.builtin.paper:NoDefense",
    "prompt_only": "containmentbench.defense.builtin.paper:PromptOnly",
    "structured_guard": "containmentbench.defense.builtin.paper:StructuredGuard",
    "tool_boundary": "containmentbench.defense.builtin.paper:ToolBoundary",
    "taint_only_v1": "containmentbench.defense.builtin.paper:TaintOnlyV1",
    "intent_ledger_v2": "containmentbench.defense.builtin.paper:IntentLedgerV2",
    "rollback_v2": "containmentbench.defense.builtin.paper:RollbackV2",
    "tool_filter": "containmentbench.defense.builtin.agentdojo:ToolFilter",
    "pi_detector": "containmentbench.defense.builtin.agentdojo:PIDetector",
    "spotlighting": "containmentbench.defense.builtin.agentdojo:Spotlighting",
    "repeat_user_prompt": "containmentbench.defense.builtin.agentdojo:RepeatUserPrompt",
}
PROJECT = "containmentbench"


@dataclass(frozen=True, slots=True)
class Registered:
    """Where one defense name points: ``target`` is ``module:Class`` or ``file.py:Class``."""

    name: str
    target: str
    origin: str                      # built-in | entry point | module | file
    dist: str | None = None          # the distribution that declares it
    version: str | None = None

    @property
    def where(self) -> str:
        if self.origin == "entry point":
            return f"entry point of {self.dist} {self.version}"
        if self.origin == "file":
            return f"file {self.target.rsplit(':', 1)[0]}"
        return self.origin


@functools.lru_cache(maxsize=1)
def _entry_points() -> dict[str, tuple[Registered, ...]]:
    from importlib.metadata import entry_points

    found: dict[str, list[Registered]] = {}
    for ep in entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        dname = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
        origin = "built-in" if dname == PROJECT else "entry point"
        reg = Registered(ep.name, ep.value, origin, dname, version)
        same = found.setdefault(ep.name, [])
        if all(r.dist != reg.dist for r in same):  # one distribution seen twice: once
            same.append(reg)
    for name, target in BUILTIN.items():
        if not any(r.origin == "built-in" for r in found.get(name, [])):
            found.setdefault(name, []).insert(0, Registered(name, target, "built-in",
                                                            PROJECT, None))
    return {k: tuple(v) for k, v in found.items()}


def registered() -> dict[str, tuple[Registered, ...]]:
    """Every name the entry points (and the built-in table) register, with each source."""
    return dict(_entry_points())


def refresh() -> None:
    """Forget what was read (after installing a plugin in the same process)."""
    _entry_points.cache_clear()
    _load_class.cache_clear()


def lookup(name: str) -> Registered:
    regs = _entry_points().get(name)
    if not regs:
        known = ", ".join(sorted(_entry_points()))
        raise DefenseError(f"unknown defense '{name}' (registered: {known}; a defense of "
                           f"your own: impl: module:Class or file.py:Class in a defenses "
                           f"file, docs/defenses.md)", field="defense")
    if len(regs) > 1:
        who = " and ".join(f"{r.dist} ({r.target})" for r in regs)
        raise DefenseError(f"defense '{name}' is registered twice: by {who}; uninstall one "
                           f"or configure it with impl: module:Class", field="defense")
    return regs[0]


def resolve(key: str, entry: Mapping[str, Any]) -> Registered:
    """Where the configuration ``entry`` (the study's key ``key``) takes its code from."""
    impl = entry.get("impl")
    name = str(entry.get("name") or key)
    if not impl:
        return lookup(name)
    impl = str(impl)
    if ":" not in impl:
        raise DefenseError(f"impl '{impl}' must be module:Class or path/to/file.py:Class",
                           field=f"defenses.{key}.impl")
    path, _ = impl.rsplit(":", 1)
    if path.endswith(".py"):
        return Registered(name, impl, "file")
    return Registered(name, impl, "module")


def _import_file(path: Path, where: str) -> Any:
    if not path.exists():
        raise DefenseError(f"{where}: defense file '{path}' not found")
    from containmentbench.integrity.safeopen import check_regular

    check_regular(path, what="defense file")  # a FIFO or a device would hang the import
    folder = str(path.parent)
    if folder not in sys.path:  # its neighbours import as top-level modules
        sys.path.insert(0, folder)
    tag = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    modname = f"containmentbench_user_{path.stem}_{tag}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise DefenseError(f"{where}: cannot load '{path}' as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        sys.modules.pop(modname, None)
        raise DefenseError(f"{where}: importing '{path}' failed: {type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:200]}") from None
    return mod


@functools.lru_cache(maxsize=128)
def _load_class(target: str, where: str) -> type[Defense]:
    path, _, cls_name = target.rpartition(":")
    if path.endswith(".py"):
        mod = _import_file(Path(path), where)
    else:
        try:
            mod = importlib.import_module(path)
        except Exception as exc:
            raise DefenseError(f"{where}: cannot import module '{path}': "
                               f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                               ) from None
    obj: Any = mod
    for part in cls_name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise DefenseError(f"{where}: '{path}' has no '{cls_name}'")
    check_class(obj, where)
    return obj


def load_class(reg: Registered, key: str | None = None) -> type[Defense]:
    return _load_class(reg.target, f"defense '{key or reg.name}'")


def config_of(key: str, entry: Mapping[str, Any]) -> DefenseConfig:
    def text(k: str, default: str) -> str:
        v = entry.get(k, default)
        if not isinstance(v, (str, int, float)):
            raise DefenseError(f"must be text, got {type(v).__name__}",
                               field=f"defenses.{key}.{k}")
        return str(v)

    params = entry.get("params") or {}
    if not isinstance(params, Mapping):
        raise DefenseError("must be a mapping", field=f"defenses.{key}.params")
    guidance = entry.get("prompt_guidance")
    if guidance is not None and not isinstance(guidance, str):
        raise DefenseError("must be text or null", field=f"defenses.{key}.prompt_guidance")
    name = text("name", key)
    return DefenseConfig(name=name, method_version=text("method_version", "0"),
                         family=text("family", name), prompt_guidance=guidance,
                         params=dict(params), key=key,
                         impl=str(entry["impl"]) if entry.get("impl") else None)


def build(key: str, entry: Mapping[str, Any]) -> Defense:
    """Import, instantiate and check one configured defense."""
    reg = resolve(key, entry)
    cls = load_class(reg, key)
    cfg = config_of(key, entry)
    try:
        d = cls(cfg)
    except DefenseError:
        raise
    except Exception as exc:
        raise DefenseError(f"defense '{key}': building {cls.__name__} failed: "
                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
                           field=f"defenses.{key}") from None
    check_assumptions(d.assumes, f"defense '{key}'")
    return d


def split_stack(label: str) -> list[str]:
    """``a+b+c`` -> its layers (one name is a stack of one)."""
    parts = [p.strip() for p in str(label).split(STACK_SEP)]
    if any(not p for p in parts):
        raise DefenseError(f"'{label}' is not a defense or a stack a+b+c", field="defense")
    if len(set(parts)) != len(parts):
        raise DefenseError(f"stack '{label}' names a layer twice", field="defense")
    return parts


def stack_entries(label: str, defenses: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [defenses[p] for p in split_stack(label)]


def ablation(stacks: Sequence[str]) -> list[str]:
    """The ablation grid of each stack: every layer alone and every leave-one-out stack
    (the stack itself kept), in a stable order without repeats."""
    out: list[str] = []
    for label in stacks:
        parts = split_stack(label)
        grid = [label]
        if len(parts) > 1:
            grid += parts
            if len(parts) > 2:
                grid += [STACK_SEP.join(p for p in parts if p != left) for left in parts]
        for g in grid:
            if g not in out:
                out.append(g)
    return out
