"""Every file kind a verb reads, bad: exit 2, one line naming the file or field, no traceback,
nothing written (issue 22, "Tracebacks and unchecked input").

File kinds: JSON outputs read back (analysis.json, candidates.json, summary.json,
SHARD.json, a suite's MANIFEST.json, cross_model/analysis.json, a qualification record), YAML
configs (a run's config.yaml, an analysis option file), Parquet (metrics tables by column
kind, CIM stores with a truncated file or damaged pages, trace tables without their schema
version), scenario records (unknown keys, ids, sessions) and a suite edited after its
manifest was frozen. A full disk names the output.
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from containmentbench.canonical import sha256_file
from tests.cli.badinput import one_line_error
from tests.conftest import ROOT, run_cli


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small frozen run: smoke x none x seed 1, reparse, metrics, analysis, freeze."""
    root = tmp_path_factory.mktemp("files") / "run"
    assert run_cli("rollout", "--suite", "smoke", "--defense", "none", "--seed", 1, "--out",
                   root / "traces" / "none" / "seed=1", "--quiet") == 0
    assert run_cli("reparse", root / "traces", "--out", root / "reparse") == 0
    assert run_cli("metrics", root / "traces", "--out",
                   root / "metrics" / "rollout_metrics.parquet", "--workers", 1) == 0
    assert run_cli("analyze", root / "metrics" / "rollout_metrics.parquet", "--out", root,
                   "--resamples", 50) == 0
    assert run_cli("freeze", root) == 0
    return root


@pytest.fixture(scope="module")
def store(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("store") / "cim"
    assert run_cli("cim", "export", "--traces", run / "traces", "--out", out) == 0
    return out


def _copy(src: Path, root: Path, name: str = "run") -> Path:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copytree(src, root / name)
    return root / name


def _edit_json(path: Path, fn: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(fn(json.loads(path.read_text()))))


def _resum(shard: Path) -> None:
    """Rewrite a shard's SHA256SUMS over its files (a writer that was wrong, consistently)."""
    names = sorted(p.name for p in shard.iterdir() if p.name != "SHA256SUMS")
    (shard / "SHA256SUMS").write_text("".join(f"{sha256_file(shard / n)}  {n}\n"
                                              for n in names))


# ------------------------------------------------------------------ JSON outputs


CANDIDATE = {"sha256": "a" * 64, "strategy": "ledger_claim", "template": "t"}
CANDIDATES = {"settings_sha256": "b" * 64, "condition": "K2+F1", "optimized_for": "none",
              "target_preserving": True, "evaluated": [CANDIDATE], "final": ["a" * 64]}


@pytest.mark.parametrize("doc,needle", [
    ({}, "settings_sha256"),                                    # was a KeyError
    ([], "candidates.json"),
    ({**CANDIDATES, "final": ["c" * 64]}, "final[0]"),          # frozen, never evaluated
    ({**CANDIDATES, "evaluated": [{**CANDIDATE, "sha256": 7}]}, "evaluated[0].sha256"),
])
def test_search_freeze_candidates(doc, needle, tmp_path, capsys):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "candidates.json").write_text(json.dumps(doc))
    one_line_error(capsys, ["search", "freeze", "--search", str(tmp_path / "s"), "--out",
                            str(tmp_path / "f")], tmp_path, (needle,))


@pytest.mark.parametrize("edit,needle", [
    (lambda d: [1], "analysis.json"),                           # was a TypeError
    (lambda d: {k: v for k, v in d.items() if k != "config"}, "config"),  # was a KeyError
    (lambda d: {**d, "config": {**d["config"], "resample": 9}}, "config.resample"),
    (lambda d: {**d, "config": {**d["config"], "resamples": "many"}}, "config.resamples"),
])
def test_reproduce_analysis_json(edit, needle, run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    _edit_json(study / "analysis.json", edit)
    one_line_error(capsys, ["reproduce", str(study), "--workers", "1"], tmp_path, (needle,))


def test_reproduce_analysis_json_not_json(run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    (study / "analysis.json").write_text('{"config": ')
    one_line_error(capsys, ["reproduce", str(study)], tmp_path, ("analysis.json:1",))


@pytest.mark.parametrize("doc,needle", [
    ({}, "input_model_actions"), ([3], "summary.json"),
    ({"input_model_actions": "7"}, "input_model_actions"),
])
def test_analyze_reparse_summary(doc, needle, run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    (study / "reparse" / "summary.json").write_text(json.dumps(doc))
    one_line_error(capsys, ["analyze", str(study / "metrics" / "rollout_metrics.parquet"),
                            "--out", str(tmp_path / "a"), "--resamples", "10", "--reparse",
                            str(study / "reparse" / "summary.json")], tmp_path, (needle,))


PART = {"part": "bootstrap", "format": 1, "metrics_sha256": "0" * 64, "settings": {},
        "data": {"configured": [], "sweep": [], "divergence": [], "skipped": [],
                 "intervals": 0, "resamples": 10}}


@pytest.mark.parametrize("flag", ["--bootstrap", "--sensitivity"])
@pytest.mark.parametrize("doc,needle", [
    ([1], "part.json"),                                          # was an AttributeError
    ({**PART, "data": {"configured": []}}, "data.sweep"),
    ({**PART, "part": "boot"}, "field 'part'"),
    ({**PART, "data": {**PART["data"], "intervals": "3"}}, "data.intervals"),
])
def test_analyze_cached_part(flag, doc, needle, run, tmp_path, capsys):
    (tmp_path / "part.json").write_text(json.dumps(doc))
    one_line_error(capsys, ["analyze", str(run / "metrics" / "rollout_metrics.parquet"),
                            "--out", str(tmp_path / "a"), "--resamples", "10", flag,
                            str(tmp_path / "part.json")], tmp_path, (needle,))


@pytest.mark.parametrize("doc,needle", [([1], "SHARD.json"), ({"model": 1}, "SHARD.json")])
def test_metrics_shard_record(doc, needle, run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    shard = study / "traces" / "none" / "seed=1"
    (shard / "SHARD.json").write_text(json.dumps(doc))
    _resum(shard)
    one_line_error(capsys, ["metrics", str(study / "traces"), "--out",
                            str(tmp_path / "m.parquet")], tmp_path, (needle,))


@pytest.mark.parametrize("edit,field", [
    (lambda m: m["stages"]["security"].update(file="../../x.jsonl"), "stages.security.file"),
    (lambda m: m["stages"]["security"].update(count="4"), "stages.security.count"),
    (lambda m: m["stages"].update(nonsense=m["stages"]["clean"]), "stages.nonsense"),
    (lambda m: m.update(scenarios=[]), "scenarios"),
])
def test_suite_manifest(edit, field, tmp_path, capsys):
    suite = _copy(ROOT / "scenarios" / "smoke", tmp_path / "case", "suite")
    m = json.loads((suite / "MANIFEST.json").read_text())
    edit(m)
    (suite / "MANIFEST.json").write_text(json.dumps(m))
    line = one_line_error(capsys, ["scenarios", "check", "--suite", str(suite)], tmp_path,
                          ("MANIFEST.json",))
    assert f"field '{field}'" in line


def test_cross_model_reproduce_analysis_json(tmp_path, capsys):
    out = tmp_path / "cross"
    out.mkdir()
    (out / "analysis.json").write_text(json.dumps({"analysis": {"resamples": 9}}))
    one_line_error(capsys, ["cross-model", "--reproduce", "--out", str(out)], tmp_path,
                   ("analysis.confidence",))


@pytest.mark.parametrize("doc,needle", [([1], "q.json"), ({"suite": "banking"}, "eligible")])
def test_adapter_qualification(doc, needle, tmp_path, capsys):
    pytest.importorskip("agentdojo")
    (tmp_path / "q.json").write_text(json.dumps(doc))
    one_line_error(capsys, ["adapters", "agentdojo", "--suite", "banking", "--defense",
                            "none", "--seed", "1", "--qualification", str(tmp_path / "q.json"),
                            "--out", str(tmp_path / "o")], tmp_path, (needle,))


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("splits")
    assert run_cli("search", "splits", "study=adaptive_smoke", f"results_dir={d}/results",
                   "--out", d / "splits.json") == 0
    return d / "splits.json"


def _search(step: str, root: Path, *extra: str) -> list[str]:
    return ["search", step, "study=adaptive_smoke", f"results_dir={root}/results", *extra,
            "--out", str(root / "out")]


@pytest.mark.parametrize("doc,needle", [
    ([1], "sp.json"), ({"splits": {"development": []}}, "splits.development"),
    ({"splits": {"development": {"families": [], "clusters": []}}},
     "splits.development.scenarios"),
])
def test_search_splits_file(doc, needle, tmp_path, capsys):
    (tmp_path / "sp.json").write_text(json.dumps(doc))
    one_line_error(capsys, _search("run", tmp_path, "--splits", str(tmp_path / "sp.json")),
                   tmp_path, (needle,))


@pytest.mark.parametrize("entry,needle", [
    ({"sha256": "a" * 64, "file": "../../../etc/hostname", "file_sha256": "0" * 64},
     "candidates[0].file"),                                  # never joined to the folder
    ({"sha256": "a" * 64, "file_sha256": "0" * 64}, "candidates[0].file"),
])
def test_search_frozen_manifest(entry, needle, splits, tmp_path, capsys):
    frozen = tmp_path / "adaptive" / "frozen"
    for search in ("transfer", "target"):  # the paper's protocol reads transfer/
        (frozen / search).mkdir(parents=True)
        (frozen / search / "candidates_manifest.json").write_text(
            json.dumps({"candidates": [entry]}))
    one_line_error(capsys, _search("replay", tmp_path, "--splits", str(splits), "--adaptive",
                                   str(tmp_path / "adaptive")), tmp_path, (needle,))


def test_search_tables_replay_index(run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    (study / "adaptive").mkdir()
    (study / "adaptive" / "replay.json").write_text(json.dumps({"x~1": {"mode": 3}}))
    one_line_error(capsys, ["search", "tables", str(study), "--qualification",
                            str(tmp_path / "q")], tmp_path, ("x~1.mode",))


# ------------------------------------------------------------------ YAML configs


CONFIG_EDITS: list[tuple[str, str]] = [
    ("study: [unclosed\n", "config.yaml:2"),                   # was a yaml traceback
    ("- 1\n", "config.yaml"),                                  # was an AttributeError
    ("", "config.yaml"),
]


@pytest.mark.parametrize("verb", ["freeze", "reproduce"])
@pytest.mark.parametrize("text,needle", CONFIG_EDITS)
def test_run_config_yaml(verb, text, needle, run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    (study / "config.yaml").write_text(text)
    one_line_error(capsys, [verb, str(study)], tmp_path, (needle,))


def _resolved(**edits: Any) -> dict[str, Any]:
    from containmentbench.config.compose import load_study

    data = load_study(["study=smoke"])
    for dotted, value in edits.items():
        node = data
        *path, last = dotted.split(".")
        for part in path:
            node = node[part]
        node[last] = value
    return data


@pytest.mark.parametrize("edits,field", [
    ({"study.seeds": [1, 1]}, "study.seeds[1]"),
    ({"study.defenses": ["none", "none"]}, "study.defenses[1]"),
    ({"analysis.resample": 5}, "analysis.resample"),
])
def test_run_config_yaml_values(edits, field, run, tmp_path, capsys):
    import yaml

    study = _copy(run, tmp_path / "case")
    (study / "config.yaml").write_text(yaml.safe_dump(_resolved(**edits)))
    line = one_line_error(capsys, ["freeze", str(study)], tmp_path, ("config.yaml",))
    assert f"field '{field}'" in line


@pytest.mark.parametrize("text,needle", [
    ("resamples: [oops\n", "an.yaml:2"), ("[1, 2]\n", "an.yaml"),
    ("resamples: 10\n", "analysis.confidence"),
])
def test_analysis_option_file(text, needle, run, tmp_path, capsys):
    (tmp_path / "an.yaml").write_text(text)
    one_line_error(capsys, ["analyze", str(run / "metrics" / "rollout_metrics.parquet"),
                            "--out", str(tmp_path / "a"), "--analysis",
                            str(tmp_path / "an.yaml")], tmp_path, (needle,))


def test_analysis_option_file_unknown_key(run, tmp_path, capsys):
    text = (ROOT / "config" / "analysis" / "default.yaml").read_text() + "resample: 10\n"
    (tmp_path / "an.yaml").write_text(text)
    line = one_line_error(capsys, ["analyze", str(run / "metrics" / "rollout_metrics.parquet"),
                                   "--out", str(tmp_path / "a"), "--analysis",
                                   str(tmp_path / "an.yaml")], tmp_path, ("an.yaml",))
    assert "field 'analysis.resample'" in line and "resamples" in line


# ------------------------------------------------------------------ Parquet


def _retype(path: Path, column: str, array: pa.Array) -> None:
    t = pq.read_table(path)
    i = t.schema.get_field_index(column)
    t = t.set_column(i, pa.field(column, array.type), array)
    pq.write_table(t, path)


@pytest.mark.parametrize("verb", ["analyze", "sensitivity", "bootstrap", "freeze", "cases"])
@pytest.mark.parametrize("column,values", [
    ("stage", lambda n: pa.array(range(n))),                   # was a polars error
    ("seed", lambda n: pa.array(["1"] * n)),
])
def test_metrics_column_kind(verb, column, values, run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    m = study / "metrics" / "rollout_metrics.parquet"
    _retype(m, column, values(pq.read_metadata(m).num_rows))
    argv = {"analyze": ["analyze", str(m), "--out", str(tmp_path / "a"), "--resamples", "10"],
            "sensitivity": ["sensitivity", str(m), "--out", str(tmp_path / "s.json")],
            "bootstrap": ["bootstrap", str(m), "--out", str(tmp_path / "b.json")],
            "freeze": ["freeze", str(study)],
            "cases": ["cases", str(study), "--out", str(tmp_path / "t")]}[verb]
    line = one_line_error(capsys, argv, tmp_path, (str(m),))
    assert f"field '{column}'" in line


def _damage_pages(path: Path) -> None:
    """Flip bytes inside every column's first data page: the footer still reads."""
    rg = pq.ParquetFile(path).metadata.row_group(0)
    data = bytearray(path.read_bytes())
    for c in range(rg.num_columns):
        col = rg.column(c)
        start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
        for i in range(start + 20, start + max(20, min(220, col.total_compressed_size - 10))):
            data[i] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("verb", ["reconstruct", "report", "blast-radius"])
@pytest.mark.parametrize("target,damage", [
    ("events", lambda p: p.write_bytes(b"not parquet")),      # was a polars ComputeError
    ("delegations", lambda p: p.write_bytes(p.read_bytes()[:-40])),
    ("events", _damage_pages),
])
def test_cim_store_corrupt(verb, target, damage, store, tmp_path, capsys):
    import polars as pl

    s = _copy(store, tmp_path / "case", "cim")
    first = pl.read_parquet(store / "delegations.parquet").row(0, named=True)
    delegation = first["delegation_id"]  # its events file is the one damaged
    victim = s / ("delegations.parquet" if target == "delegations" else first["file"])
    damage(victim)
    argv = ["cim", verb, "--store", str(s)] + \
        (["--delegation", delegation] if verb == "blast-radius" else [])
    one_line_error(capsys, argv, tmp_path, (str(s),))


@pytest.mark.parametrize("table", ["rollouts", "events"])
@pytest.mark.parametrize("verb", ["reparse", "show"])
def test_trace_without_schema_version(verb, table, run, tmp_path, capsys):
    study = _copy(run, tmp_path / "case")
    shard = study / "traces" / "none" / "seed=1"
    rid = pq.read_table(shard / "rollouts.parquet")["rollout_id"][0].as_py()
    p = shard / f"{table}.parquet"
    t = pq.read_table(p)
    pq.write_table(t.replace_schema_metadata({b"table": table.encode()}), p)
    _resum(shard)
    argv = {"reparse": ["reparse", str(study / "traces"), "--out", str(tmp_path / "r")],
            "show": ["show", rid, "--run-dir", str(study)]}[verb]
    line = one_line_error(capsys, argv, tmp_path, (str(p),))
    assert "schema_version" in line


# ------------------------------------------------------------------ scenario records


def _suite_with(tmp: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    suite = _copy(ROOT / "scenarios" / "smoke", tmp / "case", "suite")
    lines = (suite / "security.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    edit(rec)
    lines[0] = json.dumps(rec)
    (suite / "security.jsonl").write_text("\n".join(lines) + "\n")
    return suite


@pytest.mark.parametrize("edit,field", [
    (lambda r: r.update(id=""), "id"),
    (lambda r: r.update(id="../../etc/x"), "id"),
    (lambda r: r.update(id="a/b"), "id"),
    (lambda r: r.update(extra_field=1), "extra_field"),
    (lambda r: r["meta"].update(note="x"), "meta.note"),
    (lambda r: r["plans"]["benign"][0].update(sesion=1), "plans.benign[0].sesion"),
    (lambda r: r["plans"]["benign"][0].update(session=-1), "plans.benign[0].session"),
    (lambda r: r["plans"]["attack"][0].update(session=0), "plans.attack[0].session"),
    (lambda r: r["oracle"]["required"][0].update(session=-2), "oracle.required[0].session"),
])
def test_scenario_record(edit, field, tmp_path, capsys):
    suite = _suite_with(tmp_path, edit)
    line = one_line_error(capsys, ["scenarios", "check", "--suite", str(suite)], tmp_path,
                          ("security.jsonl:1",))
    assert f"field '{field}'" in line


@pytest.mark.parametrize("selection", [[], ["--scenarios", "sm-sec-0002"],
                                       ["--stage", "security"]])
def test_rollout_on_an_edited_suite(selection, tmp_path, capsys):
    # a valid record, changed after the manifest was written
    suite = _suite_with(tmp_path, lambda r: r["goals"].__setitem__(0, r["goals"][0] + "!"))
    one_line_error(capsys, ["rollout", "--suite", str(suite), "--defense", "none", "--seed",
                            "1", *selection, "--out", str(tmp_path / "case" / "o"),
                            "--quiet"], tmp_path, (str(suite / "security.jsonl"),))


def test_rollout_on_an_untouched_stage_of_an_edited_suite(tmp_path):
    suite = _suite_with(tmp_path, lambda r: r["goals"].__setitem__(0, r["goals"][0] + "!"))
    assert run_cli("rollout", "--suite", suite, "--stage", "clean", "--defense", "none",
                   "--seed", 1, "--out", tmp_path / "o", "--quiet") == 0


# ------------------------------------------------------------------ a full disk


def test_enospc_names_the_output(run, tmp_path, monkeypatch, capsys):
    import containmentbench.metrics.compute as compute

    def full(*_: Any, **__: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # no file name, as write()

    monkeypatch.setattr(compute, "write_metrics", full)
    out = tmp_path / "m.parquet"
    capsys.readouterr()
    assert run_cli("metrics", run / "traces", "--out", out, "--workers", 1) == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if "error:" in ln]  # after the progress line
    assert len(errors) == 1 and "Traceback" not in err
    assert str(out) in errors[0] and "no space left" in errors[0]
    assert str(run) not in errors[0]  # not the input folder, as before
    assert list(tmp_path.iterdir()) == []
