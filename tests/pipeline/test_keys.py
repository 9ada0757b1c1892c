"""A study means one thing (pipeline/content.py): the shard and run keys hold the content of
what a shard reads (its scenarios' bytes, the sim profile), and the metric and analysis
rules carry their layer's code version and the study's plan."""

from __future__ import annotations

import ast
import json
import shutil

from containmentbench.config.compose import load_study
from containmentbench.pipeline.content import code_digest, code_files
from containmentbench.pipeline.plan import run_key, shard_key, shards
from containmentbench.pipeline.snake import Study
from containmentbench.scenarios.manifest import suite_dir
from tests.conftest import ROOT

SMALL = ["study=smoke", "study.seeds=[1]", "study.defenses=[none]"]


def test_edited_sim_profile_file_changes_the_keys(tmp_path):
    import yaml

    from containmentbench.models.sim import packaged_profiles as _packaged_profiles

    prof = tmp_path / "mine.yaml"
    mapping = _packaged_profiles()["default"]
    prof.write_text(yaml.safe_dump(mapping, sort_keys=False))
    data = load_study([*SMALL, f"model.sim_profile={prof}"])
    s = shards(data)[0]
    key, rk = shard_key(data, s), run_key(data)
    prof.write_text(prof.read_text() + "\n# a comment changes no setting\n")
    assert shard_key(data, s) == key
    mapping["follow"]["tool_result"] = 0.9
    prof.write_text(yaml.safe_dump(mapping, sort_keys=False))
    assert shard_key(data, s) != key and run_key(data) != rk


def test_scenario_bytes_enter_only_their_shards_key(tmp_path):
    suite = tmp_path / "smoke"
    shutil.copytree(suite_dir("smoke"), suite)
    data = load_study([*SMALL, f"study.suite={suite}", "study.shard_size=2"])
    sh = shards(data)
    before = {s.id: shard_key(data, s) for s in sh}
    manifest = suite / "MANIFEST.json"
    doc = json.loads(manifest.read_text())
    edited = sh[0].scenario_ids[0]  # as if the scenario had been regenerated differently
    doc["scenarios"][edited] = "0" * 64
    manifest.write_text(json.dumps(doc))
    after = {s.id: shard_key(data, s) for s in sh}
    assert [i for i in before if before[i] != after[i]] == [sh[0].id]


def test_code_digest_follows_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "containmentbench"
    (pkg / "layer").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layer" / "__init__.py").write_text("")
    (pkg / "layer" / "run.py").write_text("def f():\n    from containmentbench.helper import g\n")
    (pkg / "helper.py").write_text("g = 1\n")
    (pkg / "other.py").write_text("h = 1\n")
    import containmentbench.pipeline.content as content

    monkeypatch.setattr(content, "__file__", str(pkg / "pipeline" / "content.py"))
    content.code_digest.cache_clear()
    first = content.code_digest("containmentbench.layer.run")
    (pkg / "other.py").write_text("h = 2\n")  # not imported: same version
    content.code_digest.cache_clear()
    assert content.code_digest("containmentbench.layer.run") == first
    (pkg / "helper.py").write_text("g = 2\n")  # a function-local import: a new version
    content.code_digest.cache_clear()
    assert content.code_digest("containmentbench.layer.run") != first
    content.code_digest.cache_clear()


def test_real_layers_cover_their_definitions():
    from containmentbench.pipeline.snake import LAYERS

    metrics = code_files(*LAYERS["metrics"])
    assert {"metrics/definitions.py", "trace/graph.py", "scenarios/oracle.py"} <= set(metrics)
    assert "analysis/run.py" not in metrics
    analysis = code_files(*LAYERS["analysis"])
    assert {"analysis/bootstrap.py", "analysis/tables.py", "analysis/figures.py"} <= \
        set(analysis)
    assert Study.code("metrics") == code_digest(*LAYERS["metrics"]) != Study.code("analysis")


def test_plan_digest_follows_the_study(tmp_path):
    def digest(defenses: str) -> str:
        study = Study({"study": "smoke",
                       "overrides": [f"results_dir={tmp_path}", "study.seeds=[1]",
                                     f"study.defenses={defenses}"]}, main_process=False)

        class W:
            model = study.models[0]
        return study.plan_digest(W())

    both = digest("[none,tool_boundary]")
    assert digest("[none,tool_boundary]") == both and digest("[none]") != both


def _tree_imports(tree: ast.AST) -> set[str]:
    """The package imports a syntax tree holds (the oracle the line scan is checked against)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "containmentbench":
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "containmentbench"}
    return out


def test_the_import_scan_finds_every_import_the_syntax_tree_has():
    from functools import partial

    from containmentbench.sources import imports_of

    _imports_of = partial(imports_of, package="containmentbench")

    files = sorted((ROOT / "containmentbench").rglob("*.py"))
    assert len(files) > 200
    for f in files:
        src = f.read_bytes()
        missing = _tree_imports(ast.parse(src)) - set(_imports_of(src))
        assert not missing, (f, sorted(missing))
    # the forms it must read: parenthesised names over lines with comments, aliases,
    # function-local imports, several modules on one import line
    src = (b"def f():\n    from containmentbench.a import (  # why (a note)\n"
           b"        b as c,  # x\n        d,\n    )\n"
           b"import os, containmentbench.e.f as g\n")
    assert _tree_imports(ast.parse(src)) <= set(_imports_of(src))
    assert {"containmentbench.a.b", "containmentbench.a.d", "containmentbench.e.f"} <= \
        set(_imports_of(src))
