"""One write path: no module but ``containmentbench/integrity/writer.py`` (with the two it is
built from, ``folders.py`` and ``atomic.py``, which nothing else imports) writes, renames or
deletes a file (issue: nothing lost, nothing forged). The test walks every module's syntax
tree and names each write it finds elsewhere, so a new ``write_text`` or ``os.replace`` that
bypasses ownership, atomicity and the frozen-study rules fails CI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "containmentbench"
WRITER = PKG / "integrity" / "writer.py"
# the writer's own parts: the folder outputs and the primitives under both halves
PARTS = {"containmentbench.integrity.folders": PKG / "integrity" / "folders.py",
         "containmentbench.integrity.atomic": PKG / "integrity" / "atomic.py"}
WRITERS = {WRITER, *PARTS.values()}

# method names that write, rename or delete whatever they are called on
ALWAYS = {"write_text", "write_bytes", "write_parquet", "write_ipc", "write_table", "to_parquet",
          "savefig", "rmtree", "unlink", "rmdir", "touch", "mkdir", "makedirs", "symlink_to",
          "hardlink_to", "copyfile", "copy2", "copytree", "truncate", "ParquetWriter",
          "mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "save_pretrained",
          "save_file", "to_csv"}
# writes only with a destination argument (polars returns text without one)
WITH_ARGS = {"write_csv", "write_ndjson", "write_json"}
# names that write only on these modules
ON_MODULE = {("os", "remove"), ("os", "replace"), ("os", "rename"), ("os", "open"),
             ("os", "truncate"), ("os", "link"), ("os", "symlink"), ("shutil", "move"),
             ("shutil", "copy")}
# library serialisers that write into a folder the writer made (writer.begin_dir): the
# converted model cache
ALLOWED = {("models/weights.py", "save_pretrained"), ("models/weights.py", "save_file"),
           # the one safe open for reading (O_RDONLY | O_NONBLOCK, a regular file only)
           ("integrity/safeopen.py", "os.open")}


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            if f.id == "open" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and set(str(node.args[1].value)) & set("wax+"):
                found.append((node.lineno, f"open(..., {node.args[1].value!r})"))
            if f.id in ALWAYS:
                found.append((node.lineno, f.id))
            continue
        if not isinstance(f, ast.Attribute):
            continue
        recv = f.value.id if isinstance(f.value, ast.Name) else None
        if recv == "writer":  # the writer module itself (and its objects)
            continue
        name = f.attr
        if name in ALWAYS or (name in WITH_ARGS and (node.args or any(
                k.arg == "file" for k in node.keywords))):
            found.append((node.lineno, name))
        elif (recv, name) in ON_MODULE:
            found.append((node.lineno, f"{recv}.{name}"))
        elif name == "rename" and node.args and not isinstance(node.args[0], ast.Dict):
            found.append((node.lineno, "rename"))
    return found


def test_no_write_outside_the_writer_module():
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path in WRITERS:
            continue
        rel = path.relative_to(PKG).as_posix()
        for line, what in _writes(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, what) not in ALLOWED:
                offenders.append(f"containmentbench/{rel}:{line}: {what}")
    assert not offenders, "writes outside integrity/writer.py:\n" + "\n".join(offenders)


def _imported(tree: ast.AST, module: str) -> set[str]:
    """The absolute module names ``tree`` imports (a relative import resolved against the
    importing ``module``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = module.split(".")[:-node.level]
                base = ".".join([*up, base] if base else up)
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def test_only_the_writer_imports_its_parts():
    """Every other module writes through ``writer`` (its rules: ownership, atomicity, frozen
    studies), never through the primitives it is built from."""
    offenders = []
    for path in sorted(PKG.rglob("*.py")):
        if path in WRITERS:
            continue
        rel = path.relative_to(PKG.parent).with_suffix("").as_posix().replace("/", ".")
        hit = _imported(ast.parse(path.read_text(encoding="utf-8")), rel) & set(PARTS)
        offenders += [f"{rel} imports {m}" for m in sorted(hit)]
    assert not offenders, "\n".join(offenders)
    # folders builds on atomic, never on writer (which re-exports both): no circle
    folders = ast.parse(PARTS["containmentbench.integrity.folders"].read_text())
    assert "containmentbench.integrity.writer" not in _imported(
        folders, "containmentbench.integrity.folders")


@pytest.mark.parametrize("src", [
    "Path(p).write_text('x')", "open(p, 'w')", "open(p, mode)\nopen(q, 'ab')", "os.replace(a, b)",
    "shutil.rmtree(d)", "df.write_parquet(p)", "fig.savefig(p)", "p.rename(q)",
    "pq.write_table(t, p)", "df.write_csv(p)", "tempfile.mkdtemp()", "x.unlink()",
])
def test_the_walker_finds_each_kind_of_write(src):
    assert _writes(ast.parse(src)), src


@pytest.mark.parametrize("src", [
    "df.rename({'a': 'b'})", "df.write_csv()", "open(p)", "open(p, 'rb')",
    "writer.write_bytes(p, b)", "xs.remove(1)", "d.copy()", "s.replace('a', 'b')",
])
def test_reads_and_lookalikes_are_not_writes(src):
    assert not _writes(ast.parse(src)), src
