"""One safe way to open a file, paths resolved before any check, and a study lock for every
writing verb (issue 37, item 5).

A FIFO or a link to /dev/zero named ``.containmentbench-out`` hung a verb or ate its memory;
an ``--out`` reached through a symlinked parent wrote new files into a frozen study (the
guard walked the unresolved path); two concurrent forced analyses of a frozen study were
frozen as a mix of both (the command line took no study lock)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from containmentbench.errors import BenchError
from containmentbench.integrity import safeopen
from tests.conftest import run_cli

CLI = str(Path(sys.executable).parent / "containmentbench")


def _special(tmp: Path, kind: str, name: str = "f") -> Path:
    p = tmp / name
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev_zero":
        p.symlink_to("/dev/zero")
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    elif kind == "folder":
        p.mkdir()
    elif kind == "link":
        (tmp / "target").write_text("{}")
        p.symlink_to(tmp / "target")
    return p


@pytest.mark.parametrize("kind,why", [("fifo", "a FIFO"), ("dev_zero", "a character device"),
                                      ("socket", "socket"), ("folder", "a folder")])
def test_special_files_are_refused_without_blocking(kind, why, tmp_path):
    p = _special(tmp_path, kind)
    t0 = time.monotonic()
    with pytest.raises(BenchError, match=why) as exc:
        safeopen.read_bytes(p, limit=1 << 20)
    assert time.monotonic() - t0 < 2 and str(p) in str(exc.value)


def test_links_size_and_encoding(tmp_path):
    link = _special(tmp_path, "link")
    assert safeopen.read_bytes(link, limit=10) == b"{}"  # a user's own link: followed
    with pytest.raises(BenchError, match="symbolic link"):
        safeopen.read_bytes(link, limit=10, follow=False)
    inside = tmp_path / "study"
    inside.mkdir()
    (inside / "out.json").symlink_to(tmp_path / "target")
    with pytest.raises(BenchError, match="a link out of"):
        safeopen.read_bytes(inside / "out.json", limit=10, within=inside)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(BenchError, match="more than the 99 this reader takes"):
        safeopen.read_bytes(big, limit=99)
    (tmp_path / "latin").write_bytes(b"caf\xe9")
    with pytest.raises(BenchError, match="not UTF-8 text"):
        safeopen.read_text(tmp_path / "latin", limit=10)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "link"])
@pytest.mark.parametrize("alone", [True, False], ids=["alone", "beside-files"])
def test_an_ownership_record_that_is_no_regular_file_stops_a_verb(kind, alone, tmp_path):
    """``.containmentbench-out`` as a FIFO hung a verb writing into its folder; as a link to
    /dev/zero it ate memory. One line naming it, exit 2, and nothing written beside it."""
    out = tmp_path / "suite"
    out.mkdir()
    _special(out, kind, ".containmentbench-out")
    if not alone:
        (out / "MANIFEST.json").write_text("{}")
    before = sorted(p.name for p in out.iterdir())
    res = subprocess.run([CLI, "scenarios", "generate", "--suite", "smoke", "--out", str(out),
                          "--force"], capture_output=True, text=True, timeout=60)
    err = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(err) == 1 and ".containmentbench-out" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_json_input_that_is_a_fifo_is_one_line(tmp_path, capsys):
    fifo = _special(tmp_path, "fifo", "analysis.json")
    from containmentbench.integrity.inputs import read_json

    with pytest.raises(BenchError, match="not a regular file"):
        read_json(fifo)


@pytest.fixture(scope="module")
def frozen_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    s = tmp_path_factory.mktemp("lock") / "study"
    assert run_cli("rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--out",
                   s / "traces" / "none" / "seed=1", "--quiet") == 0
    assert run_cli("metrics", s / "traces", "--out", s / "metrics" / "rollout_metrics.parquet",
                   "--workers", 1) == 0
    assert run_cli("analyze", s / "metrics" / "rollout_metrics.parquet", "--out", s,
                   "--resamples", 100) == 0
    assert run_cli("freeze", s) == 0
    return s


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_an_out_through_a_symlinked_parent_is_seen_where_it_is(frozen_study, tmp_path,
                                                               capsys):
    s = tmp_path / "study"
    shutil.copytree(frozen_study, s)
    (tmp_path / "alias").symlink_to(s / "tables")   # a folder that is the study's tables/
    before = _snapshot(s)
    capsys.readouterr()
    rc = run_cli("sensitivity", s / "metrics" / "rollout_metrics.parquet", "--out",
                 tmp_path / "alias" / "new.json")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "is frozen" in err[0], err
    assert _snapshot(s) == before
    assert not (s / "tables" / "new.json").exists()
    # forced, it is a change of the frozen study like any other: journalled, re-frozen
    assert run_cli("sensitivity", s / "metrics" / "rollout_metrics.parquet", "--out",
                   tmp_path / "alias" / "new.json", "--force") == 0
    assert b"tables/new.json" in (s / ".rebuilt.jsonl").read_bytes()
    assert run_cli("freeze", s) == 0 and run_cli("verify", s) == 0


def test_two_concurrent_forced_analyses_are_not_frozen_as_a_mix(frozen_study, tmp_path):
    s = tmp_path / "study"
    shutil.copytree(frozen_study, s)
    argv = [CLI, "analyze", str(s / "metrics" / "rollout_metrics.parquet"), "--out", str(s),
            "--force", "--resamples"]
    first = subprocess.Popen([*argv, "400"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    locks = Path(os.environ["CONTAINMENTBENCH_STATE_DIR"]) / "locks"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
            f"pid={first.pid} " in p.read_text() for p in locks.glob("*.lock")
            if p.is_file()):
        time.sleep(0.05)
    second = subprocess.run([*argv, "700"], capture_output=True, text=True, timeout=300)
    first.communicate(timeout=300)
    err = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(err) == 1, err
    assert "another command or workflow run is writing into this study" in err[0]
    assert first.returncode == 0
    import json

    assert json.loads((s / "analysis.json").read_text())["config"]["resamples"] == 400
    assert run_cli("freeze", s) == 0 and run_cli("verify", s) == 0


def test_a_job_of_the_run_holding_the_lock_writes_under_it(frozen_study, tmp_path,
                                                         monkeypatch):
    """The workflow run holds each study's lock with a token; its jobs carry the token."""
    from containmentbench.integrity import writer

    s = tmp_path / "study"
    shutil.copytree(frozen_study, s)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from containmentbench.integrity import writer; "
        f"writer.lock_study({str(s)!r}, 'tok123'); print('held', flush=True); "
        "time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BenchError, match="another command or workflow run"):
            writer.lock_study(s)
        monkeypatch.setenv(writer.ENV_PIPELINE, "tok123")
        writer.lock_study(s)  # a job of that run
        writer.release_locks()
        monkeypatch.setenv(writer.ENV_PIPELINE, "another-run")
        with pytest.raises(BenchError, match="another command or workflow run"):
            writer.lock_study(s)
    finally:
        holder.kill()
        holder.wait()
        writer.release_locks()


# ------------------------------------------------------------------ one way to open
PKG = Path(__file__).resolve().parents[2] / "containmentbench"
#: the modules that read study files, records, journals, manifests and hostile inputs
SCOPE = [*sorted((PKG / "integrity").glob("*.py")), *sorted((PKG / "freeze").glob("*.py")),
         PKG / "results.py", PKG / "report" / "serve.py", PKG / "cim" / "otel.py",
         PKG / "cim" / "otlp_shape.py", PKG / "gateway" / "tokens.py",
         PKG / "cli" / "cim_deploy_cmd.py", PKG / "cli" / "verify_cmd.py",
         PKG / "cli" / "freeze_cmd.py", PKG / "cli" / "guards.py"]
#: reads of bytes this process has just written itself (a temporary, the scratch folder)
OWN = {("integrity/folders.py", "open"), ("freeze/manifest.py", "read_bytes")}


def _reads(tree) -> list[tuple[int, str]]:
    import ast

    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            mode = node.args[1].value if len(node.args) > 1 and isinstance(
                node.args[1], ast.Constant) else "r"
            if not set(str(mode)) & set("wax+"):
                out.append((node.lineno, "open"))
        elif isinstance(f, ast.Attribute) and f.attr in ("read_text", "read_bytes") and not (
                isinstance(f.value, ast.Name) and f.value.id == "safeopen"):
            out.append((node.lineno, f.attr))
        elif isinstance(f, ast.Attribute) and f.attr == "load" and isinstance(
                f.value, ast.Name) and f.value.id in ("json", "yaml") and not (
                node.args and isinstance(node.args[0], ast.Call)):  # a handle, not text
            out.append((node.lineno, f"{f.value.id}.load"))
    return out


def test_every_read_in_scope_goes_through_the_safe_open():
    import ast

    offenders = []
    for path in SCOPE:
        rel = path.relative_to(PKG).as_posix()
        if rel == "integrity/safeopen.py":
            continue
        for line, what in _reads(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, what) not in OWN:
                offenders.append(f"containmentbench/{rel}:{line}: {what}")
    assert not offenders, "reads around integrity/safeopen.py:\n" + "\n".join(offenders)


def test_the_scan_catches_a_plain_read():
    import ast

    tree = ast.parse("import json\nx = p.read_text()\ny = open(p)\nz = json.load(fh)\n"
                     "w = open(p, 'wb')\nv = safeopen.read_bytes(p, limit=1)\n")
    assert [w for _, w in _reads(tree)] == ["read_text", "open", "json.load"]
