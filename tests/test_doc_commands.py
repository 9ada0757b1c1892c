"""Documented commands are tested: every code block of README.md and docs/*.md marked runnable
(```` ```sh runnable ```` or ```` ```python runnable ````) is run as written, in document
order, from a scratch folder that looks like the repository root (Snakefile, workflow/,
config/, scenarios/, slurm/ linked in; results/ its own), then docs/examples/*.ipynb is
executed with nbclient. A doc that drifts from the code fails here.

The runnable blocks are small on purpose: the README's quick tour builds the smoke study with
one seed (about two minutes on two cores) and every later block reads it; GPU and Slurm lines
are written in their dry forms (``snakemake -n``, ``submit.py --dry-run``). A block marked
``requires=MODULE`` is skipped when that module is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = ("Snakefile", "workflow", "config", "scenarios", "slurm", "profiles", "examples")
_FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.S | re.M)
BLOCK_TIMEOUT = 900


def blocks() -> list[tuple[str, int, str, dict[str, str], str]]:
    """(file, line, language, options, code) of every runnable block, in document order."""
    out = []
    for path in DOCS:
        text = path.read_text()
        for m in _FENCE.finditer(text):
            lang, info, code = m.group(1), m.group(2).split(), m.group(3)
            if "runnable" not in info:
                continue
            opts = dict(x.split("=", 1) for x in info if "=" in x)
            line = text[: m.start()].count("\n") + 1
            out.append((path.relative_to(REPO).as_posix(), line, lang, opts, code))
    return out


def commands(code: str) -> list[str]:
    """Shell lines of a block: comments and blanks dropped, continuations joined."""
    out, cur = [], ""
    for raw in code.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    for name in LINKED:
        (root / name).symlink_to(REPO / name)
    return root


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the commands as a user types them: this interpreter's console scripts first
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    env["CB_PROGRESS"] = "0"
    return env


def test_there_are_runnable_blocks():
    found = blocks()
    files = {f for f, *_ in found}
    assert {"README.md", "docs/results.md"} <= files
    assert any("snakemake" in c and "study=smoke" in c for *_, c in found)
    # the walk from a user's own records to a headline (docs/scenarios.md)
    assert any(f == "docs/scenarios.md" and "scenarios build --from" in c and
               "study.suite=" in c for f, *_, c in found)


@pytest.mark.parametrize("block", blocks(), ids=lambda b: f"{b[0]}:{b[1]}")
def test_documented_block_runs(block, workdir):
    where, line, lang, opts, code = block
    need = opts.get("requires")
    if need and importlib.util.find_spec(need) is None:
        pytest.skip(f"{where}:{line} needs {need}")
    if lang in ("sh", "bash", "console"):
        for cmd in commands(code):
            proc = subprocess.run(["bash", "-c", cmd], cwd=workdir, env=_env(),
                                  capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
            assert proc.returncode == 0, (f"{where}:{line}: `{cmd}` exited "
                                          f"{proc.returncode}\n{proc.stderr[-3000:]}")
    elif lang == "python":
        proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=_env(),
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
        assert proc.returncode == 0, f"{where}:{line}\n{proc.stderr[-3000:]}"
    else:
        pytest.fail(f"{where}:{line}: a runnable block must be sh or python, not {lang}")


@pytest.mark.parametrize("notebook", sorted((REPO / "docs" / "examples").glob("*.ipynb")),
                         ids=lambda p: p.name)
def test_example_notebook_executes(notebook, workdir):
    """After the README's blocks built the smoke study (the notebook reads it)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if not (workdir / "results" / "smoke" / "sim-default" / "MANIFEST.json").exists():
        pytest.skip("the README's quick tour did not build the smoke study here")
    nb = nbformat.read(notebook, as_version=4)
    old = dict(os.environ)
    os.environ.update(_env())
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(workdir)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
