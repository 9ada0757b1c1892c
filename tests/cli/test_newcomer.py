"""A command line a newcomer can read: ``--help`` in groups, ``run`` with the overrides of
every verb, the ``--study`` hint, ``show --run-dir``, interrupted versus failed shards, the
headline's seeds and config-drift warning, and ``results/README.md``'s commands."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from containmentbench.cli.main import GROUPS, VERBS, build_parser, main
from tests.conftest import ROOT


def _error(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, (argv, err)
    return err[0]


# ------------------------------------------------------------------ --help in groups


def test_help_lists_every_verb_once_under_its_group(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    titles = [t for t, _ in GROUPS]
    assert titles[0] == "start here"
    pos = [out.index(f"\n{t}:\n") for t in titles]
    assert pos == sorted(pos)  # in the order a newcomer needs them
    for title, verbs in GROUPS:
        block = out[out.index(f"\n{title}:\n"):].split("\n\n")[0]
        for v in verbs:
            assert re.search(rf"^  {v.replace('_', '-')}\s", block, re.M), (title, v)
    for v in VERBS:  # once in the whole page
        assert len(re.findall(rf"^  {v.replace('_', '-')}\s", out, re.M)) == 1, v
    # every verb a parser registers is in a group, and the newcomer's come first
    assert set(build_parser()._subparsers._group_actions[0].choices) == \
        {v.replace("_", "-") for v in VERBS}
    assert {"run", "headline", "status", "compare"} <= set(GROUPS[0][1])


# ------------------------------------------------------------------ --study and show


@pytest.mark.parametrize("argv,right", [
    (["status", "--study", "smoke"], "say the study as study=smoke (e.g. containmentbench "
                                     "status study=smoke)"),
    (["headline", "--study", "full_main"], "study=full_main"),
    (["compare", "--study", "smoke", "a=x"], "study=smoke"),
    (["show", "r-1", "--study", "results/smoke/sim-default"],
     "show takes the run directory as --run-dir RUN_DIR"),
])
def test_study_flag_gets_the_right_form(argv, right, capsys):
    assert right in _error(capsys, argv)


def test_show_takes_run_dir(tmp_path, capsys):
    # an empty folder given as the run directory: one line naming it, exit 2
    line = _error(capsys, ["show", "r-0000000000000000", "--run-dir", str(tmp_path)])
    assert str(tmp_path) in line


# ------------------------------------------------------------------ run


def test_run_hands_snakemake_the_overrides_exactly(capsys, monkeypatch):
    """The JSON list in ``--config overrides=...`` goes through Snakemake's own --config
    parser and ``overrides_from`` back to the very tokens given."""
    from snakemake.cli import parse_config

    from containmentbench.pipeline.snake import overrides_from

    monkeypatch.chdir(ROOT)
    tokens = ["study=smoke", "study.seeds=[1]", "study.defenses=[none,tool_boundary]",
              "results_dir=/tmp/a dir", "decoding.temperature=0.5"]
    assert main(["run", *tokens, "--cores", "1", "-n", "--print"]) == 0
    argv = shlex.split(capsys.readouterr().out)
    assert Path(argv[0]).name == "snakemake" or argv[1:3] == ["-m", "snakemake"]
    assert argv[argv.index("--cores") + 1] == "1" and "-n" in argv
    config = argv[argv.index("--config") + 1:]
    assert config[0] == "study=smoke" and config[1].startswith("overrides=[")
    assert overrides_from(parse_config(config)) == tokens


def test_run_refuses_bad_overrides_before_snakemake(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert "study.seedz" in _error(capsys, ["run", "study=smoke", "study.seedz=[1]"])
    assert "containmentbench run study=smoke" in _error(capsys, ["run", "smoke"])
    assert "say which study" in _error(capsys, ["run", "backend=sim"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_run_dry_run_plans_the_study(tmp_path):
    res = subprocess.run([sys.executable, "-m", "containmentbench.cli.main", "run",
                          "study=smoke", "study.seeds=[1]", "study.defenses=[none]",
                          f"results_dir={tmp_path}", "--cores", "1", "-n"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    assert "rollout" in out and "freeze" in out
    assert not (tmp_path / "smoke" / "sim-default" / "traces").exists()


# ------------------------------------------------------------------ interrupted vs failed


def test_interrupted_and_failed_shards(tmp_path):
    from containmentbench.config.compose import load_study
    from containmentbench.pipeline.plan import jobs, run_dir
    from containmentbench.pipeline.status import study_status

    data = load_study(["study=smoke", f"results_dir={tmp_path}", "study.seeds=[1,2,3,4]",
                       "study.defenses=[none]"])  # one job per seed
    js = jobs(data)
    assert len(js) >= 3
    logs = run_dir(data) / "logs" / "rollout"
    logs.mkdir(parents=True)
    # job 0: Ctrl-C (cli/main.py prints this line); job 1: stopped on its own error;
    # job 2: a traceback; the rest never ran
    (logs / f"{js[0].name}.log").write_text("job 0: 3/8 rollouts\ncontainmentbench: "
                                            "interrupted\n")
    (logs / f"{js[1].name}.log").write_text("progress\ncontainmentbench: error: field "
                                            "'backend.url': connection refused\n")
    (logs / f"{js[2].name}.log").write_text("Traceback (most recent call last):\n  File x\n"
                                            "MemoryError\n")
    st = study_status(data)
    assert st["interrupted"] == [s.id for s in js[0].shards]
    assert st["failed"] == [s.id for j in js[1:3] for s in j.shards]
    assert st["missing"] == [s.id for j in js[3:] for s in j.shards]
    # a newer log of job 1's next try (a redo marker generation) that was killed: interrupted
    import os
    import time

    redo = logs / f"{js[1].name}.redo-1.log"
    redo.write_text("job 1: 1/8 rollouts\n")
    later = time.time() + 5
    os.utime(redo, (later, later))
    assert study_status(data)["interrupted"] == [s.id for j in js[:2] for s in j.shards]
    # Ctrl-C while the job was still importing: Python's traceback of the interrupt
    (logs / f"{js[2].name}.log").write_text("Traceback (most recent call last):\n  File x\n"
                                            "KeyboardInterrupt\n")
    assert study_status(data)["interrupted"] == [s.id for j in js[:3] for s in j.shards]
    # a killed job's temporary shard folder, no log: interrupted
    s = js[3].shards[0]
    d = run_dir(data) / "traces" / s.id
    d.parent.mkdir(parents=True)
    (d.parent / f".{d.name}.tmp-123").mkdir()
    assert s.id in study_status(data)["interrupted"]
    # a FIFO in a job log's place is one line naming it, not a status that waits forever
    from containmentbench.errors import BenchError

    fifo = logs / f"{js[3].name}.log"
    os.mkfifo(fifo)
    with pytest.raises(BenchError, match="job log is a FIFO"):
        study_status(data)


# ------------------------------------------------------------------ results/README.md


def _documented_commands(text: str) -> list[str]:
    spans = re.findall(r"`(containmentbench [^`]+)`", text)
    fill = {"<study>": "smoke", "<model_slug>": "sim-default", "<rollout_id>": "r-0123"}
    out = []
    for sp in spans:
        cmd = " ".join(sp.split())
        for k, v in fill.items():
            cmd = cmd.replace(k, v)
        out.append(cmd)
    return out


def test_results_readme_commands_parse():
    """Every command results/README.md shows parses, and says a study in the one form."""
    from containmentbench.cli import study_args

    cmds = _documented_commands((ROOT / "results" / "README.md").read_text())
    assert len(cmds) >= 6 and any(c.startswith("containmentbench run ") for c in cmds)
    parser = build_parser()
    for cmd in cmds:
        argv = shlex.split(cmd)[1:]
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{cmd}: does not parse ({exc.code})")
        target = getattr(args, "target", None)
        if target and "/" not in target[0]:
            study_args.overrides(target, args.verb)  # raises on `status smoke`


def test_old_readme_form_is_caught():
    from containmentbench.cli import study_args
    from containmentbench.errors import BenchError

    args = build_parser().parse_args(shlex.split("status smoke"))
    with pytest.raises(BenchError):
        study_args.overrides(args.target, args.verb)


# ------------------------------------------------------------------ headline: seeds, drift


@pytest.mark.slow
def test_headline_states_seeds_and_warns_on_drift(finished_smoke, capsys):
    from tests.conftest import SMALL_SMOKE_OVERRIDES

    res = str(finished_smoke / "results")
    same = ["study=smoke", f"results_dir={res}", *SMALL_SMOKE_OVERRIDES]
    assert main(["headline", *same]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[0].startswith("Headline: study smoke")
    assert lines[1].startswith("seeds: 1 (1 seed per scenario and defense")
    assert cap.err == ""
    # the study's own seeds are [1, 2]: the one-seed run's numbers, said on stderr
    other = [t for t in same if not t.startswith("study.seeds")]
    assert main(["headline", *other]) == 0
    cap = capsys.readouterr()
    assert cap.out == "\n".join(lines) + "\n"
    warn = cap.err.strip().splitlines()
    assert len(warn) == 1 and "warning:" in warn[0]
    assert "study.seeds [1] in the run, [1, 2] composed now" in warn[0]
    # a run directory given as a path: nothing composed, no warning
    assert main(["headline", str(finished_smoke / "results" / "smoke" / "sim-default")]) == 0
    assert capsys.readouterr().err == ""


def test_run_waits_for_snakemake_after_ctrl_c():
    """Ctrl-C while Snakemake stops its jobs: ``run`` waits for it (never kills it) and
    exits 130 when the interrupted Snakemake failed."""
    from containmentbench.cli.run_cmd import wait

    class Proc:
        calls = 0

        def wait(self):
            self.calls += 1
            if self.calls < 3:
                raise KeyboardInterrupt
            return 1

    p = Proc()
    assert wait(p) == 130 and p.calls == 3
    done = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert wait(done) == 3


def test_snakefile_unknown_key_shows_the_snakemake_form(capsys):
    """``snakemake --config study=smoke seeds=[1]`` (the config Snakemake hands the Snakefile):
    one line that shows the form Snakemake takes for a key path, not only ``study.seeds=[1]``
    (which Snakemake's own --config parser refuses with a traceback)."""
    from containmentbench.pipeline.snake import setup

    with pytest.raises(SystemExit) as exc:
        setup({"study": "smoke", "seeds": [1]})
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "field 'seeds'" in err[0]
    assert "snakemake --config study=smoke 'overrides=[study.seeds=[1]]'" in err[0]
    assert "containmentbench run study=smoke study.seeds=[1]" in err[0]
