"""The package's imports run one way: no import circle between its modules, and no module uses
another module's underscore names.

Every ``containmentbench/**/*.py`` is read with ``ast``: imports at module level and inside
functions (and under ``TYPE_CHECKING``) all count, relative imports are resolved, and
``from pkg import name`` is an import of the submodule ``pkg.name`` when there is one. A name
one module shares with another gets a public name where it is defined; what two modules both
need goes to a module below both. The self-check at the end shows that the scan finds a circle
and a private use when there is one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from tests.conftest import ROOT


@dataclass
class Scan:
    edges: dict[str, set[str]] = field(default_factory=dict)
    private: list[str] = field(default_factory=list)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_files(pkg_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the package folder."""
    out = {}
    for p in sorted(pkg_dir.rglob("*.py")):
        parts = p.relative_to(pkg_dir.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _base(name: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    keep = len(parts) - node.level + (1 if is_pkg else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def scan(pkg_dir: Path) -> Scan:
    mods = module_files(pkg_dir)
    res = Scan()
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_pkg = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> package module it refers to
        deps = res.edges.setdefault(name, set())
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                base = _base(name, is_pkg, n)
                for a in n.names:
                    sub = f"{base}.{a.name}"
                    if sub in mods:
                        deps.add(sub)
                        bound[a.asname or a.name] = sub
                    elif base in mods:
                        deps.add(base)
                        if _private(a.name) and base != name:
                            res.private.append(f"{name} imports {base}.{a.name}")
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name in mods:
                        deps.add(a.name)
                    if a.asname and a.name in mods:
                        bound[a.asname] = a.name
                    elif not a.asname and a.name.split(".")[0] in mods:
                        bound[a.name.split(".")[0]] = a.name.split(".")[0]
        for n in ast.walk(tree):
            # m._x, or pkg.sub._x: an underscore attribute of another module of the package
            if not isinstance(n, ast.Attribute) or not _private(n.attr):
                continue
            chain, v = [n.attr], n.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if not isinstance(v, ast.Name) or v.id not in bound:
                continue
            mod, rest = bound[v.id], chain[::-1]
            while len(rest) > 1 and f"{mod}.{rest[0]}" in mods:
                mod, rest = f"{mod}.{rest[0]}", rest[1:]
            if len(rest) == 1 and mod != name:
                res.private.append(f"{name} uses {mod}.{n.attr}")
        deps.discard(name)
    return res


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One import cycle (as a path) per strongly connected group of more than one module."""
    g = nx.DiGraph([(a, b) for a, bs in edges.items() for b in bs])
    out = []
    for comp in nx.strongly_connected_components(g):
        if len(comp) > 1:
            path = [a for a, _ in nx.find_cycle(g.subgraph(comp))]
            k = path.index(min(path))
            out.append(path[k:] + path[:k] + [path[k]])
    return sorted(out)


def test_no_import_circles():
    found = circles(scan(ROOT / "containmentbench").edges)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_module_uses_another_modules_private_names():
    found = scan(ROOT / "containmentbench").private
    assert not found, "underscore names used across modules:\n" + "\n".join(found)


def test_the_scan_finds_a_circle_and_private_uses(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "1"\n')
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import _helper, shared\n\n_own = 1\n"
                              "from pkg import __version__\n")
    (pkg / "b.py").write_text("_helper = shared = 1\n\n\ndef late():\n"
                              "    from . import a\n    return a\n")
    (pkg / "sub" / "c.py").write_text("import pkg.b as mb\nfrom .. import a\n\n\n"
                                      "def f():\n    return mb._helper, a.__doc__, a.shared\n")
    (pkg / "sub" / "d.py").write_text("import pkg.sub.c\n\nx = pkg.sub.c._hidden\n")
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                              "    from pkg.f import F\n")
    (pkg / "f.py").write_text("from pkg import e\n\nF = e\n")
    s = scan(pkg)
    assert s.edges["pkg.sub.c"] == {"pkg.b", "pkg.a"}  # relative import resolved
    assert s.edges["pkg.b"] == {"pkg.a"}  # an import inside a function counts
    assert circles(s.edges) == [["pkg.a", "pkg.b", "pkg.a"], ["pkg.e", "pkg.f", "pkg.e"]]
    assert sorted(s.private) == ["pkg.a imports pkg.b._helper", "pkg.sub.c uses pkg.b._helper",
                                 "pkg.sub.d uses pkg.sub.c._hidden"]
    assert circles({"x": {"y"}, "y": {"z"}}) == []
