"""``analyze --out`` never writes tables into a foreign folder or over another model's run
(data safety: never touch what this verb did not write)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import run_cli


def _metrics(path, model: str, backend: str = "sim"):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"model": [model, model], "backend": [backend, backend],
                             "decoding": ["{}", "{}"], "tool_mode": ["prompt", "prompt"],
                             "tools_offered": ["all", "all"]}),
                   path)
    return path


def test_refuses_a_foreign_folder(tmp_path, capsys):
    m = _metrics(tmp_path / "in" / "rollout_metrics.parquet", "sim:default")
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("keep me")
    assert run_cli("analyze", m, "--out", home) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a run output" in err[0] and "notes.txt" in err[0]
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]
    assert (home / "notes.txt").read_text() == "keep me"


def test_refuses_another_models_run(tmp_path, capsys):
    from containmentbench.integrity import writer

    run = tmp_path / "results" / "smoke" / "sim-always_follow"
    writer.ensure_dir(run, "run")  # a run folder as the pipeline's pre-flight makes it
    _metrics(run / "metrics" / "rollout_metrics.parquet", "sim:always_follow")
    (run / "tables").mkdir()
    (run / "tables" / "table09.md").write_text("theirs")
    mine = _metrics(tmp_path / "results" / "smoke" / "sim-default" / "metrics"
                    / "rollout_metrics.parquet", "sim:default")
    assert run_cli("analyze", mine, "--out", run) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another run" in err[0] and "sim:always_follow" in err[0]
    assert (run / "tables" / "table09.md").read_text() == "theirs"
    assert sorted(p.name for p in (run / "tables").iterdir()) == ["table09.md"]


def test_refuses_a_hand_made_folder_that_looks_like_a_run(tmp_path, capsys):
    """A folder with config.yaml and tables/ is not a run folder unless we made it."""
    m = _metrics(tmp_path / "in" / "rollout_metrics.parquet", "sim:default")
    proj = tmp_path / "proj"
    (proj / "tables").mkdir(parents=True)
    (proj / "config.yaml").write_text("mine: 1\n")
    assert run_cli("analyze", m, "--out", proj) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a run output" in err[0]
    assert sorted(p.name for p in proj.iterdir()) == ["config.yaml", "tables"]
