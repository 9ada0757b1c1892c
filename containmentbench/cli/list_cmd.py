"""``containmentbench list studies|models|defenses|backends``: what a study can be made of,
one line each, read from the config tree (``config/``): the name to say (``study=NAME``,
``model=NAME``, ``backend=NAME``, a defense in ``study.defenses``) and its first comment line
or its key facts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

KINDS = ("studies", "models", "defenses", "backends")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="the studies, models, defenses and backends a study can "
                                    "name (config/), one per line")
    p.add_argument("kind", choices=KINDS, help="what to list: " + ", ".join(KINDS))
    p.add_argument("--defenses-file", default=None, metavar="YAML",
                   help="with 'defenses': also list the defenses of this file")
    p.set_defaults(func=cmd_list)


def _comment(path: Path) -> str:
    """The file's leading comment as one line ('' when it has none)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(x for x in lines if x)
    first = text.split(". ")[0].rstrip(".")
    return first if len(first) <= 110 else first[:109] + "…"


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text()) or {}


def rows(kind: str, defenses_file: str | None = None) -> list[tuple[str, str]]:
    from containmentbench.config.loader import config_dir

    root = config_dir()
    if kind == "defenses":
        return defense_rows(_yaml(root / "defenses" / "builtin.yaml"), defenses_file)
    group = {"studies": "study", "models": "model", "backends": "backend"}[kind]
    out = []
    for p in sorted((root / group).glob("*.yaml")):
        data = _yaml(p)
        what = _comment(p)
        if kind == "studies":
            facts = [f"suite {data.get('suite')}"]
            if data.get("adapter"):
                facts.append(f"adapter {data['adapter'].get('name')}")
            if (data.get("adaptive") or {}).get("enabled"):
                facts.append("adaptive search")
            if data.get("models"):
                facts.append(f"{len(data['models'])} models")
            facts.append(f"{len(data.get('seeds') or [])} seed(s)")
            what = "; ".join([*([what] if what else []), ", ".join(facts)])
        elif kind == "models" and not what:
            what = f"path {data.get('path')}"
        out.append((p.stem, what))
    return out


def defense_rows(configured: dict[str, Any], extra: str | None = None
                 ) -> list[tuple[str, str]]:
    """One row per configured defense (the defenses group, then a defenses file): where its
    code comes from and its code identity; then registered defenses no configuration uses."""
    from containmentbench.config.defenses import read_defenses_file
    from containmentbench.defense.identity import code_identity
    from containmentbench.defense.registry import registered, resolve
    from containmentbench.errors import BenchError

    entries = dict(configured)
    if extra:
        entries.update(read_defenses_file(extra))
    out, used = [], set()
    for key, d in entries.items():
        try:
            reg = resolve(key, d)
            used.add(reg.name)
            code = f"code {code_identity(key, d)['sources'][:12]}"
            where = reg.where
        except BenchError as exc:
            where, code = "unavailable", exc.detail
        out.append((key, f"{d.get('family', '')}, method {d.get('method_version', '')}; "
                         f"{where}; {code}"))
    for name, regs in sorted(registered().items()):
        if name not in used:
            out.append((name, f"registered ({', '.join(r.where for r in regs)}), not "
                              f"configured: add it to a defenses file"))
    return out


def cmd_list(args: argparse.Namespace) -> int:
    items = rows(args.kind, args.defenses_file)
    key = {"studies": "study", "models": "model", "backends": "backend",
           "defenses": "study.defenses=[...]"}[args.kind]
    width = max(len(n) for n, _ in items)
    print(f"# {args.kind} (say {key}=NAME)" if args.kind != "defenses"
          else "# defenses (say study.defenses=[NAME,...])")
    for name, what in items:
        print(f"{name:<{width}}  {what}")
    return 0
