"""Nothing the pipeline runs deletes a covered file of a frozen study (issue 37, item 1).

Snakemake removes a job's outputs before the job runs and again when it fails; an edited
``analysis/bootstrap.json`` made the ``tables`` job refuse, and Snakemake then removed 14
frozen files with no copy anywhere. Every covered output is now flagged ``update()``: on the
finished smoke study, each covered cache edited in turn, then every covered table, figure,
``analysis.json`` and report page edited at once, each followed by a plain rerun
(``--keep-going``, so every job that can run does), a job killed in the middle of its work
and a Snakemake killed while the report is built: every frozen byte stays at its path or is
kept under ``.replaced-<n>/``, an edit stays as the editor left it, and once the edits are
put back a plain rerun verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.cli.main import main
from tests.conftest import ROOT, SMALL_SMOKE, copy_finished_smoke

pytestmark = pytest.mark.slow
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
CACHES = ("metrics/rollout_metrics.parquet", "analysis/sensitivity.json",
          "analysis/bootstrap.json", "reparse/summary.json", "reparse/reparse.parquet",
          "audit/summary.json")


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _snakemake(base: Path, *extra: str) -> subprocess.Popen:
    # an absolute results_dir: each job's command line names this study's folder
    return subprocess.Popen([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(base),
                             "--cores", "2", *extra, "--config", "study=smoke",
                             f"overrides=[results_dir={base / 'results'},{SMALL_SMOKE}]"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _run(base: Path, *extra: str) -> tuple[int, str]:
    p = _snakemake(base, *extra)
    out, _ = p.communicate(timeout=600)
    return p.returncode, out


def _kept(study: Path, frozen: dict[str, str], edited: dict[str, str]) -> dict[str, list[str]]:
    """Where each frozen file is now: in place, kept under ``.replaced-<n>/``, edited (the
    editor's bytes in place, as left), or lost."""
    asides = sorted(study.glob(".replaced-*"))
    out: dict[str, list[str]] = {"in_place": [], "aside": [], "edited": [], "lost": []}
    for rel, digest in sorted(frozen.items()):
        p = study / rel
        if p.is_file() and _sha(p) == digest:
            out["in_place"].append(rel)
        elif any((a / rel).is_file() and _sha(a / rel) == digest for a in asides):
            out["aside"].append(rel)
        elif rel in edited and p.is_file() and _sha(p) == edited[rel]:
            out["edited"].append(rel)
        else:
            out["lost"].append(rel)
    return out


def _edit(p: Path) -> None:
    """A plausible hand edit: one value changed, the file still of its kind."""
    if p.suffix == ".parquet":
        t = pq.read_table(p)
        col = next((i for i, f in enumerate(t.schema) if pa.types.is_integer(f.type)
                    or pa.types.is_floating(f.type)), None)
        if col is None or t.num_rows == 0:  # no number to change: a note in the footer
            t = t.replace_schema_metadata({**(t.schema.metadata or {}), b"edited": b"1"})
        else:
            values = t.column(col).to_pylist()
            values[0] = (values[0] or 0) + 1
            t = t.set_column(col, t.schema.field(col),
                             pa.array(values, t.schema.field(col).type))
        pq.write_table(t, p)
    elif p.suffix == ".json":
        doc = json.loads(p.read_text())
        doc["edited_by_hand"] = True
        p.write_text(json.dumps(doc))
    else:
        p.write_bytes(p.read_bytes() + b"\n")


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from each process's parent id in /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def _job_of(pid: int, verb: str) -> int | None:
    """The Python process of the ``containmentbench <verb>`` job this Snakemake started."""
    for d in _descendants(pid):
        try:
            argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"python" in argv[0] and argv[1:3] and argv[1].endswith(b"containmentbench") \
                and argv[2] == verb.encode():
            return d
    return None


def _kill_during(base: Path, verb: str, target: str, *extra: str) -> int:
    """Run Snakemake, and once the ``verb`` job has run a moment, SIGKILL the job
    (``target="job"``) or Snakemake itself (``"snakemake"``; the orphaned job is waited
    for). Returns Snakemake's exit status."""
    p = _snakemake(base, *extra)
    deadline = time.monotonic() + 300
    job = None
    while job is None and p.poll() is None and time.monotonic() < deadline:
        job = _job_of(p.pid, verb)
        time.sleep(0.05)
    assert job is not None, p.communicate()[0][-3000:]
    time.sleep(1.5)
    os.kill(job if target == "job" else p.pid, signal.SIGKILL)
    p.communicate(timeout=600)
    if target == "snakemake":  # the orphaned job runs to its end
        while Path(f"/proc/{job}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    return p.returncode


@pytest.fixture(scope="module")
def frozen_study(tmp_path_factory: pytest.TempPathFactory, finished_smoke: Path):
    base = copy_finished_smoke(finished_smoke, tmp_path_factory.mktemp("frozen-reruns"))
    study = base / "results" / "smoke" / "sim-default"
    # the copy's Snakemake metadata names relative paths: one plain run with the absolute
    # results_dir every run below uses (it re-freezes nothing: same bytes)
    rc, out = _run(base)
    assert rc == 0, out[-3000:]
    frozen = json.loads((study / "MANIFEST.json").read_text())["files"]
    return base, study, frozen


def test_an_edited_cache_then_a_rerun_deletes_no_frozen_file(frozen_study):
    base, study, frozen = frozen_study
    for rel in CACHES:
        p = study / rel
        original = p.read_bytes()
        _edit(p)
        _, out = _run(base, "--keep-going")
        where = _kept(study, frozen, {rel: _sha(p)})
        assert where["lost"] == [], (rel, where["lost"], out[-3000:])
        assert where["edited"] == [rel], (rel, where["edited"])  # the edit is left as it was
        assert "Removing output files of failed job" not in out, rel
        p.write_bytes(original)  # put back: the study is as frozen again
    assert main(["verify", str(study)]) == 0


def test_edited_tables_then_a_rerun_deletes_no_frozen_file(frozen_study):
    base, study, frozen = frozen_study
    edited = [rel for rel in frozen if rel.split("/")[0] in ("tables", "figures")]
    edited += ["analysis.json", "report/index.html"]
    originals = {rel: (study / rel).read_bytes() for rel in edited}
    for rel in edited:
        _edit(study / rel)
    rc, out = _run(base, "--keep-going")
    where = _kept(study, frozen, {rel: _sha(study / rel) for rel in edited})
    assert where["lost"] == [], (where["lost"][:5], out[-3000:])
    assert len(where["in_place"]) + len(where["aside"]) + len(where["edited"]) == len(frozen)
    assert rc != 0 and "refusing to re-freeze" in (study / "logs" / "freeze.log").read_text()
    for rel, data in originals.items():
        if not (study / rel).is_file() or _sha(study / rel) != frozen[rel]:
            (study / rel).write_bytes(data)
    rc, out = _run(base)
    assert rc == 0, out[-3000:]
    assert main(["verify", str(study)]) == 0


@pytest.mark.parametrize("verb,rule,target", [("analyze", "tables", "job"),
                                              ("report", "report", "snakemake")])
def test_a_kill_in_the_middle_of_a_rule_deletes_no_frozen_file(frozen_study, verb, rule,
                                                               target):
    base, study, frozen = frozen_study
    _kill_during(base, verb, target, "--forcerun", rule)
    where = _kept(study, frozen, {})
    assert where["lost"] == [], where["lost"][:5]
    # a plain rerun after the kill (a lock and Snakemake's copies of the outputs left
    # behind when Snakemake itself was killed) finishes the study and it verifies
    rc, out = _run(base, "--forcerun", rule)
    assert rc == 0, out[-3000:]
    assert main(["verify", str(study)]) == 0
    assert _kept(study, json.loads((study / "MANIFEST.json").read_text())["files"],
                 {})["lost"] == []


def test_every_covered_output_of_every_rule_is_kept_from_snakemake():
    """The Snakefile stops before any job when a rule's covered output lacks ``update()``."""
    from types import SimpleNamespace

    from containmentbench.pipeline.snake import Study

    class Out(str):
        def __new__(cls, text: str, flags: dict) -> Out:
            s = super().__new__(cls, text)
            s.flags = flags
            return s

    s = Study.__new__(Study)
    s.dir = Path("/r/smoke")
    ok = SimpleNamespace(name="tables", output=[Out("/r/smoke/{model}/tables/a.csv",
                                                    {"update": True}),
                                                Out("/r/smoke/{model}/jobs/x.done", {})])
    assert s.kept_outputs([ok]) == ["tables: /r/smoke/{model}/tables/a.csv"]
    for path in ("/r/smoke/{model}/analysis/bootstrap.json", "/r/smoke/{model}/MANIFEST.json",
                 "/r/smoke/cross_model/MANIFEST.json", "/r/smoke/{model}/report"):
        bare = SimpleNamespace(name="r", output=[Out(path, {})])
        with pytest.raises(SystemExit) as exc:
            s.kept_outputs([ok, bare])
        assert exc.value.code == 2, path


def test_deleting_both_manifests_of_a_keyed_study_then_a_rerun(finished_smoke, tmp_path,
                                                               monkeypatch):
    """Removing MANIFEST.json and .frozen-manifest.json and rerunning signed a hand-edited
    table as freeze 1 (verify --expect-freeze 1 passed). The study is keyed with
    ``freeze --key``; after the deletion the rerun refuses the edit, the counter and the
    identity continue, and once the table is put back the next run signs freeze n+1."""
    monkeypatch.setenv("CONTAINMENTBENCH_KEY", "a-key-for-the-deletion-test-0123456789")
    monkeypatch.setenv("CONTAINMENTBENCH_STATE_DIR", str(tmp_path / "state"))
    base = copy_finished_smoke(finished_smoke, tmp_path / "keyed")
    study = base / "results" / "smoke" / "sim-default"
    assert main(["freeze", str(study), "--key"]) == 0
    rc, out = _run(base)   # the absolute results_dir of this module's runs, settled
    assert rc == 0, out[-3000:]
    m = json.loads((study / "MANIFEST.json").read_text())
    n, sid = m["freeze"], m["study_id"]
    assert m["auth"]["alg"] == "hmac-sha256" and n >= 2
    table = study / "tables" / "table09_security_positive_control.csv"
    original = table.read_bytes()
    (study / "MANIFEST.json").unlink()
    (study / ".frozen-manifest.json").unlink()
    table.write_bytes(original.replace(b"0.", b"1.", 1))
    rc, out = _run(base)
    assert rc != 0
    log = (study / "logs" / "freeze.log").read_text()
    assert "continues from this machine's record" in log and "table09" in log
    assert not (study / "MANIFEST.json").exists()
    assert main(["verify", str(study), "--expect-freeze", "1"]) == 1
    table.write_bytes(original)
    rc, out = _run(base)
    assert rc == 0, out[-3000:]
    m = json.loads((study / "MANIFEST.json").read_text())
    assert m["freeze"] == n + 1 and m["study_id"] == sid
    assert main(["verify", str(study), "--expect-freeze", str(n + 1)]) == 0
