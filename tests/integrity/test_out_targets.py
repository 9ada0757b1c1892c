"""Every verb's ``--out`` pointed at what is not its own output: a frozen study, its manifest
and tables, a committed suite, a folder of unrelated files, a user's file. Each is refused with
one line naming the output, exit 2, with and without ``--force``, and not one byte or mtime
under the test folder changes (leftover-looking names included). A frozen study's own outputs
are redone only with ``--force``; then only that verb's files change (old bytes kept under
``.replaced-<n>/``), and ``freeze`` accepts exactly those."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A frozen one-seed study, a copy of a committed suite, a user's folder and file."""
    base = tmp_path_factory.mktemp("out-targets")
    s = base / "study"
    assert run_cli("rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--out",
                   s / "traces" / "none" / "seed=1", "--quiet") == 0
    assert run_cli("metrics", s / "traces", "--out", s / "metrics" / "rollout_metrics.parquet",
                   "--workers", 1) == 0
    assert run_cli("reparse", s / "traces", "--out", s / "reparse") == 0
    assert run_cli("analyze", s / "metrics" / "rollout_metrics.parquet", "--out", s,
                   "--resamples", 100) == 0
    assert run_cli("freeze", s) == 0
    shutil.copytree(ROOT / "scenarios" / "exposed_smoke", base / "suite")
    user = base / "user"
    user.mkdir()
    (user / "notes.txt").write_text("mine\n")
    for name in (".data.old-backup", ".x.tmp-1", ".x.cbtmp-000000000000-00000000"):
        (user / name).mkdir()
        (user / name / "keep").write_text("mine\n")
    (base / "notes.txt").write_text("mine\n")
    return base


TARGETS = ("study", "study/MANIFEST.json", "study/tables/table09_security_positive_control.csv",
           "study/analysis.json", "suite", "user", "notes.txt")
VERBS = {
    "rollout": ["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--quiet",
                "--out", "{t}"],
    "metrics": ["metrics", "{b}/study/traces", "--workers", "1", "--out", "{t}"],
    "reparse": ["reparse", "{b}/study/traces", "--out", "{t}"],
    "analyze": ["analyze", "{b}/study/metrics/rollout_metrics.parquet", "--resamples", "50",
                "--out", "{t}"],
    "sensitivity": ["sensitivity", "{b}/study/metrics/rollout_metrics.parquet", "--out", "{t}"],
    "bootstrap": ["bootstrap", "{b}/study/metrics/rollout_metrics.parquet", "--resamples", "50",
                  "--out", "{t}"],
    "cases": ["cases", "{b}/study", "--out", "{t}"],
    "audit run": ["audit", "run", "{b}/study", "--no-replay", "--out", "{t}"],
    "audit suite build": ["audit", "suite", "build", "--out", "{t}"],
    "report": ["report", "{b}/study", "--out", "{t}"],
    "cim export": ["cim", "export", "--traces", "{b}/study/traces", "--out", "{t}"],
    "cim generate": ["cim", "generate", "--users", "10", "--agents", "100", "--out", "{t}"],
    "scenarios generate": ["scenarios", "generate", "--suite", "smoke", "--out", "{t}"],
    "adapters metrics": ["adapters", "metrics", "{b}/study/traces", "--out", "{t}"],
    "adapters parity": ["adapters", "parity", "{b}/study/traces", "--out", "{t}"],
    "cross-model": ["cross-model", "{b}/study/metrics/rollout_metrics.parquet",
                    "{b}/study/metrics/rollout_metrics.parquet", "--out", "{t}"],
}
# (verb, target) pairs where the target IS that verb's own output: covered below
OWN = {("analyze", "study")}


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_out_at_what_is_not_the_verbs_own_is_refused(world, verb, target, force, capsys):
    if (verb, target) in OWN:
        pytest.skip("the verb's own output (test below)")
    argv = [a.replace("{b}", str(world)).replace("{t}", str(world / target))
            for a in VERBS[verb]] + (["--force"] if force else [])
    before = _snapshot(world)
    capsys.readouterr()
    rc = run_cli(*argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2, (rc, err)
    assert len(err) == 1 and str(world / target) in err[0], err
    assert "Traceback" not in err[0]
    assert _snapshot(world) == before


@pytest.mark.parametrize("argv,own", [
    (["metrics", "{s}/traces", "--workers", "1", "--out", "{s}/metrics/rollout_metrics.parquet"],
     {"metrics/rollout_metrics.parquet"}),
    (["analyze", "{s}/metrics/rollout_metrics.parquet", "--resamples", "60", "--out", "{s}"],
     {"analysis.json", "tables/", "figures/"}),
    (["reparse", "{s}/traces", "--out", "{s}/reparse"], {"reparse/"}),
])
def test_a_frozen_studys_own_output_is_redone_only_with_force(world, tmp_path, argv, own,
                                                              capsys):
    s = tmp_path / "study"
    shutil.copytree(world / "study", s)
    args = [a.replace("{s}", str(s)) for a in argv]
    before = _snapshot(tmp_path)
    capsys.readouterr()
    assert run_cli(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "frozen" in err[0] and "--force" in err[0], err
    assert _snapshot(tmp_path) == before
    assert run_cli(*args, "--force") == 0
    after = _snapshot(tmp_path)
    changed = {k for k in set(before) | set(after) if before.get(k, (None,))[0]
               != after.get(k, (None,))[0]}
    visible = {k for k in changed if not any(p.startswith(".")
                                             for p in k.split("/")[1:])}
    for k in visible:
        rel = k.split("/", 1)[1]
        assert rel in own or any(rel.startswith(o) for o in own if o.endswith("/")), k
    if visible:  # the old bytes are kept and the change journalled (identical bytes: kept)
        assert (s / ".replaced-0").is_dir() and (s / ".rebuilt.jsonl").is_file()
    assert run_cli("freeze", s) == 0 and run_cli("verify", s) == 0
    assert json.loads((s / "MANIFEST.json").read_text())["freeze"] == 2


def test_an_edited_table_is_never_re_frozen(world, tmp_path, capsys):
    s = tmp_path / "study"
    shutil.copytree(world / "study", s)
    t = s / "tables" / "table09_security_positive_control.csv"
    t.write_text(t.read_text().replace("0.", "1.", 1))
    capsys.readouterr()
    assert run_cli("freeze", s) == 1
    err = capsys.readouterr().err
    assert "tables/table09_security_positive_control.csv: changed since the last freeze" in err
    # a legitimate rebuild of the tables puts the edit right, and then freeze accepts
    assert run_cli("analyze", s / "metrics" / "rollout_metrics.parquet", "--resamples", 100,
                   "--out", s, "--force") == 0
    assert run_cli("freeze", s) == 0 and run_cli("verify", s) == 0


def test_an_edited_cache_is_refused_before_use(world, tmp_path, capsys):
    """An edited, unhashed analysis cache used to flip a verdict through one plain rerun."""
    s = tmp_path / "study"
    shutil.copytree(world / "study", s)
    m = s / "metrics" / "rollout_metrics.parquet"
    assert run_cli("bootstrap", m, "--resamples", 50, "--out", s / "analysis" / "boot.json",
                   "--force") == 0
    assert run_cli("freeze", s) == 0   # the cache is covered by the manifest now
    boot = s / "analysis" / "boot.json"
    doc = json.loads(boot.read_text())
    doc["resamples"] = doc.get("resamples", 0)
    boot.write_text(json.dumps(doc, sort_keys=True) + " \n")   # edited by hand
    capsys.readouterr()
    rc = run_cli("analyze", m, "--resamples", 50, "--bootstrap", boot, "--out", s, "--force")
    err = capsys.readouterr().err
    assert rc == 2 and "changed since the study was frozen" in err
    capsys.readouterr()
    assert run_cli("verify", s) == 1
    assert "analysis/boot.json: sha256 differs" in capsys.readouterr().err


def test_a_file_dropped_into_audit_is_caught(world, tmp_path, capsys):
    s = tmp_path / "study"
    shutil.copytree(world / "study", s)
    (s / "audit").mkdir(exist_ok=True)
    (s / "audit" / "extra.json").write_text("{}\n")
    capsys.readouterr()
    assert run_cli("verify", s) == 1
    assert "audit/extra.json: file added" in capsys.readouterr().err
    assert run_cli("freeze", s) == 1


def test_a_covered_file_forced_through_a_relative_path(world, tmp_path, monkeypatch):
    """The default ``results_dir`` is relative ("results"): a covered file rewritten with
    force through a relative path keeps its old bytes under ``.replaced-<n>/`` too (this
    raised ValueError: the frozen study's root is absolute)."""
    from containmentbench.integrity import writer

    s = tmp_path / "study"
    shutil.copytree(world / "study", s)
    monkeypatch.chdir(tmp_path)
    rel = Path("study") / "tables" / "table09_security_positive_control.csv"
    old = rel.read_bytes()
    assert "replaced" in writer.write_text(rel, "edited\n", kind="tables", force=True)
    assert (s / ".replaced-0" / "tables" / rel.name).read_bytes() == old
    assert rel.read_text() == "edited\n"
