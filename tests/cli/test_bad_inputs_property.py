"""Property: every verb turns bad input into exit 2, ONE line on stderr naming the file, line
or field, no traceback, and writes nothing.

Generated inputs: truncated / empty / random-byte / wrong-schema Parquet fed to the verbs that
read traces, metrics or CIM stores; a wrong-type value at every path of a scenario record;
non-UTF-8 bytes and deep nesting in every text input; plus the specific cases of the data
safety issue (window 0, negative budgets and seeds, an empty or folder --study-config, a CIM
manifest that is not JSON, a wrong-shape MANIFEST.json, ...). ``CASES`` counts the examples
actually run (see the closing note of the issue).
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from containmentbench.canonical import sha256_file
from containmentbench.cli.main import main
from tests.cli.badinput import CASES, one_line_error
from tests.conftest import ROOT

# derandomized (CI is reproducible) and without shrinking (the inputs are small already)
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


# ------------------------------------------------------------------ Parquet inputs


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bad") / "tr" / "shard"
    assert main(["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1",
                 "--scenarios", "sm-sec-0001", "--stage", "security", "--out", str(out),
                 "--quiet"]) == 0
    return out


def _wrong_schema() -> bytes:
    import io

    buf = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2, 3]}), buf)
    return buf.getvalue()


BAD_PARQUET = st.one_of(
    st.just(b""),
    st.binary(min_size=1, max_size=64),
    st.integers(min_value=1, max_value=400).map(lambda n: ("cut", n)),
    st.just(("schema", 0)),
)


def _materialize(kind: Any, good: bytes) -> bytes:
    if isinstance(kind, bytes):
        return kind
    if kind[0] == "cut":
        return good[: max(1, len(good) - kind[1])]
    return _wrong_schema()


# the tables each verb reads (reparse needs only the events with the raw completions)
READS = [("metrics", "rollouts"), ("metrics", "events"), ("metrics", "edges"),
         ("reparse", "events"), ("cim-export", "events"), ("cim-export", "rollouts")]


@SETTINGS
@given(kind=BAD_PARQUET, case=st.sampled_from(READS))
def test_bad_trace_parquet(kind, case, shard, tmp_path, capsys):
    verb, table = case
    root = tmp_path / "case"
    shutil.rmtree(root, ignore_errors=True)
    tr = root / "tr"
    shutil.copytree(shard.parent, tr)
    d = tr / shard.name
    p = d / f"{table}.parquet"
    p.write_bytes(_materialize(kind, p.read_bytes()))
    sums = [f"{sha256_file(f)}  {f.name}" for f in sorted(d.glob("*.parquet"))]
    (d / "SHA256SUMS").write_text("\n".join(sums) + "\n")  # consistent sums: a bad writer
    argv = {"metrics": ["metrics", str(tr), "--out", str(root / "m.parquet")],
            "reparse": ["reparse", str(tr), "--out", str(root / "r")],
            "cim-export": ["cim", "export", "--traces", str(tr), "--out", str(root / "c")]}
    one_line_error(capsys, argv[verb], root, (str(p), str(tr)))


@SETTINGS
@given(kind=BAD_PARQUET)
def test_bad_metrics_parquet_to_analyze(kind, tmp_path, capsys):
    root = tmp_path / "case"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    good = ROOT / "tests" / "analysis"  # any real metrics file would do; build a tiny one
    m = root / "rollout_metrics.parquet"
    m.write_bytes(_materialize(kind, _wrong_schema() * 2) if not isinstance(kind, tuple)
                  or kind[0] != "schema" else _wrong_schema())
    assert good.exists()
    one_line_error(capsys, ["analyze", str(m), "--out", str(root / "a")], root, (str(m),))


# ------------------------------------------------------------------ scenario records


def _record() -> dict[str, Any]:
    line = (ROOT / "scenarios" / "smoke" / "security.jsonl").read_text().splitlines()[0]
    return json.loads(line)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


_JSON = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
         bool: "boolean", type(None): "null"}
# objects whose keys are data (tool argument names, memory keys, plan names ...)
FREE_KEYS = {"args", "fields", "facts", "memory_state", "max_visibility", "targets", "plans"}


def _pattern(path: tuple) -> str:
    out, free = [], False
    for k in path:
        out.append("[]" if isinstance(k, int) else ("*" if free else str(k)))
        free = not isinstance(k, int) and k in FREE_KEYS and not free
    return "/".join(out)


@functools.cache
def _observed() -> dict[str, set[str]]:
    """JSON types seen at each path of every committed scenario (an independent oracle of
    what is well-typed: the generator's own output)."""
    seen: dict[str, set[str]] = {}

    def walk(v: Any, path: tuple) -> None:
        seen.setdefault(_pattern(path), set()).add(_JSON[type(v)])
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, (*path, k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, (*path, i))
    for f in sorted((ROOT / "scenarios").glob("*/*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                walk(json.loads(line), ())
    return seen


def _wrong(path: tuple) -> list[Any]:
    """Values of a JSON type never seen at this path in the committed suites."""
    cands = [12345, "text", None, [], {"x": 1}, True, 1.5]
    ok = _observed()[_pattern(path)]
    return [c for c in cands if _JSON[type(c)] not in ok]


def _set(obj: Any, path: tuple, value: Any) -> Any:
    obj = json.loads(json.dumps(obj))
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return obj


RECORD = _record()
PATHS = _paths(RECORD)


def _suite_with(tmp: Path, security_line: bytes) -> Path:
    suite = tmp / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    shutil.copytree(ROOT / "scenarios" / "smoke", suite)
    rest = (suite / "security.jsonl").read_bytes().splitlines(keepends=True)[1:]
    (suite / "security.jsonl").write_bytes(security_line + b"\n" + b"".join(rest))
    return suite


@settings(max_examples=60, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_wrong_type_anywhere_in_a_scenario_record(data, tmp_path, capsys):
    path = data.draw(st.sampled_from(PATHS))
    bad = data.draw(st.sampled_from(_wrong(path)))
    rec = _set(RECORD, path, bad)
    suite = _suite_with(tmp_path, json.dumps(rec).encode())
    line = one_line_error(capsys, ["scenarios", "check", "--suite", str(suite)], tmp_path,
                          ("security.jsonl:1",))
    assert "field '" in line  # names the field


def test_every_path_every_wrong_type_is_named():
    """Exhaustive over one record: every path x every wrong JSON type (no CLI, fast)."""
    from containmentbench.errors import ValidationError
    from containmentbench.scenarios.model import Scenario

    n = 0
    for path in PATHS:
        for bad in _wrong(path):
            with pytest.raises(ValidationError) as exc:
                Scenario.from_dict(_set(RECORD, path, bad))
            assert exc.value.field, (path, bad)
            n += 1
    CASES["run"] += n
    assert n > 1000


def test_top_level_fields_removed_one_at_a_time(tmp_path, capsys):
    # nullable fields (null seen in the suites) and the descriptive `meta` may be absent
    optional = {k for k in RECORD if "null" in _observed()[_pattern((k,))]} | {"meta"}
    for key in sorted(set(RECORD) - optional):
        rec = {k: v for k, v in RECORD.items() if k != key}
        suite = _suite_with(tmp_path, json.dumps(rec).encode())
        one_line_error(capsys, ["scenarios", "check", "--suite", str(suite)], tmp_path,
                       ("security.jsonl:1",))


# ------------------------------------------------------------------ text inputs


TEXT_INPUTS = ["scenario", "study-config", "manifest", "cim-manifest", "sums"]


@SETTINGS
@given(which=st.sampled_from(TEXT_INPUTS),
       payload=st.one_of(
           st.binary(min_size=1, max_size=40).map(lambda b: b"\xff\xfe" + b),  # not UTF-8
           st.sampled_from([2_000, 100_000]).map(
               lambda n: ("[" * n + "]" * n).encode()),                          # deep nesting
           st.sampled_from([b"", b"[]", b"null", b"{}", b"\"x\"", b"42", b'{"files": []}',
                            b'{"files": {"../../etc/passwd": "00"}, "scenario_manifests": {}}',
                            b'{"files": {"/dev/zero": "00"}, "scenario_manifests": {}}'])))
def test_bad_text_inputs(which, payload, shard, tmp_path, capsys):
    root = tmp_path / "case"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    if which == "scenario":
        suite = _suite_with(root, payload.replace(b"\n", b" "))
        argv, needles = ["scenarios", "check", "--suite", str(suite)], ("security.jsonl",)
    elif which == "study-config":
        cfg = root / "config.yaml"
        cfg.write_bytes(payload)
        argv = ["rollout", "--study-config", str(cfg), "--shard", "x", "--out", str(root / "o")]
        needles = (str(cfg),)
    elif which == "manifest":
        study = root / "study"
        study.mkdir()
        (study / "MANIFEST.json").write_bytes(payload)
        argv, needles = ["verify", str(study)], ("MANIFEST.json", str(study))
        if payload.startswith(b'{"files": {"'):
            # well-formed but hostile paths: verify must neither open them nor pass
            CASES["run"] += 1
            assert main(argv) in (1, 2)
            capsys.readouterr()
            return
    elif which == "cim-manifest":
        store = root / "store"
        assert main(["cim", "export", "--traces", str(shard.parent), "--out", str(store),
                     "--chain"]) == 0
        (store / "manifest.json").write_bytes(payload)
        argv, needles = ["cim", "verify-chain", "--store", str(store)], ("manifest.json",)
    else:
        tr = root / "tr"
        shutil.copytree(shard.parent, tr)
        (tr / shard.name / "SHA256SUMS").write_bytes(payload)
        # a shard whose sums are unreadable is not finished: nothing to compute from
        argv, needles = ["metrics", str(tr), "--out", str(root / "m.parquet")], (str(tr),)
    one_line_error(capsys, argv, root, needles)


def test_deeply_nested_json_to_parse(monkeypatch, capsys, tmp_path):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": ' + "[" * 100_000 + "]" * 100_000
                                                  + "}\n"))
    one_line_error(capsys, ["parse"], tmp_path, (":1", "stdin", "nested"))


# ------------------------------------------------------------------ the issue's cases


@pytest.mark.parametrize("argv,needle", [
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--window", "0",
      "--out", "{t}/o"], "window"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--max-steps", "-1",
      "--out", "{t}/o"], "max-steps"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "-4", "--out", "{t}/o"],
     "seed"),
    (["metrics", "{t}", "--out", "{t}/m.parquet", "--workers", "-3"], "workers"),
    (["metrics", "{t}", "--out", "{t}"], "shards"),
    (["reparse", "{t}/missing", "--out", "{t}/r"], "missing"),
    (["rollout", "--study-config", "{t}", "--shard", "x"], "{t}"),
    (["rollout", "--study-config", "{t}/empty.yaml", "--shard", "x"], "empty.yaml"),
    (["config", "check", "backend.window=0"], "backend.window"),
    (["config", "check", "study.name=../../x"], "study.name"),
    (["config", "check", "results_dir=a b|c"], "results_dir"),
    (["config", "check", "runtime.max_steps=-1"], "runtime.max_steps"),
    (["config", "check", "study.seeds=[-1]"], "study.seeds"),
    (["config", "check", "study.shard_size=0"], "study.shard_size"),
    (["config", "check", "cluster.metrics_workers=0"], "cluster.metrics_workers"),
    (["config", "check", "analysis.resamples=0"], "analysis.resamples"),
    (["scenarios", "generate", "--suite", "smoke"], "--out"),
    (["scenarios", "generate", "--suite", "smoke", "--out", "{t}/s", "--seed", "-1"], "seed"),
    (["cim", "generate", "--out", "{t}/g", "--jobs", "0"], "jobs"),
    # issue 22: every numeric flag bounded (cli/argtypes.py), refused before the verb runs
    (["adapters", "agentdojo", "--suite", "banking", "--defense", "none", "--seed", "-1",
      "--out", "{t}/o"], "--seed"),
    (["adapters", "agentdojo", "--suite", "banking", "--defense", "none", "--seed", "1",
      "--max-user-tasks", "-1", "--out", "{t}/o"], "--max-user-tasks"),
    (["adapters", "agentdojo", "--suite", "banking", "--defense", "none", "--seed", "1",
      "--pipeline", "openai", "--model", "m", "--top-p", "2", "--out", "{t}/o"], "--top-p"),
    (["adapters", "agentdojo-qualify", "--suite", "banking", "--max-user-tasks", "-1",
      "--out", "{t}/q.json"], "--max-user-tasks"),
    (["adapters", "agentdojo-qualify", "--suite", "banking", "--seeds", "1,1",
      "--out", "{t}/q.json"], "seeds"),
    (["adapters", "agentdojo-qualify", "--suite", "banking", "--seeds", "1,-2",
      "--out", "{t}/q.json"], "seeds"),
    (["adapters", "metrics", "{t}", "--out", "{t}/m.parquet", "--workers", "0"], "--workers"),
    (["audit", "suite", "run", "--out", "{t}/a", "--limit", "-1"], "--limit"),
    (["audit", "suite", "run", "--out", "{t}/a", "--runs", "0"], "--runs"),
    (["audit", "run", "{t}", "--batch-size", "0"], "--batch-size"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--top-p", "2",
      "--out", "{t}/o"], "--top-p"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--temperature",
      "-0.1", "--out", "{t}/o"], "--temperature"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--max-tokens",
      "0", "--out", "{t}/o"], "--max-tokens"),
    (["rollout", "--suite", "smoke", "--defense", "none", "--seed", "1", "--top-p", "nan",
      "--out", "{t}/o"], "--top-p"),
    (["show", "r-x", "--run-dir", "{t}", "--width", "-5"], "--width"),
    (["analyze", "{t}/m.parquet", "--out", "{t}/a", "--resamples", "0"], "--resamples"),
    (["sensitivity", "{t}/m.parquet", "--out", "{t}/s.json", "--resamples", "-1"],
     "--resamples"),
    (["bootstrap", "{t}/m.parquet", "--out", "{t}/b.json", "--resamples", "0"], "--resamples"),
    (["cross-model", "{t}/a", "{t}/b", "--out", "{t}/c", "--resamples", "0"], "--resamples"),
    (["cim", "export", "--traces", "{t}", "--out", "{t}/c", "--tick-ms", "0"], "--tick-ms"),
    (["cim", "generate", "--out", "{t}/g", "--seed", "-3"], "--seed"),
    (["cim", "generate", "--out", "{t}/g", "--loops-w1", "-1"], "--loops-w1"),
    (["cim", "drift", "--store", "{t}", "--baseline-frac", "1.5"], "--baseline-frac"),
    (["cim", "reconstruct", "--store", "{t}", "--max-buckets", "0"], "--max-buckets"),
    (["cim", "report", "--store", "{t}", "--max-buckets", "0"], "--max-buckets"),
    (["scenarios", "freeze", "--suite", "smoke", "--seed", "-1"], "--seed"),
    (["reproduce", "{t}", "--workers", "0"], "--workers"),
    # issue 22: overrides (config/keys.py): unknown '+key', duplicates, a missing profile
    (["config", "check", "+study.foo=1"], "study.foo"),
    (["config", "check", "+analysis.resample=10"], "analysis.resample"),
    (["config", "check", "++analysis.comparisons.0.clam=true"], "analysis.comparisons"),
    (["config", "check", "model.sim_profile=nope"], "model.sim_profile"),
    (["config", "check", "study.seeds=[1,1]"], "study.seeds"),
    (["config", "check", "study.defenses=[none,none]"], "study.defenses"),
    (["config", "check", "study.stages=[security,security]"], "study.stages"),
    (["status", "study=smoke", "+study.foo=1"], "study.foo"),
])
def test_issue_cases(argv, needle, tmp_path, capsys):
    (tmp_path / "empty.yaml").write_text("")
    argv = [a.replace("{t}", str(tmp_path)) for a in argv]
    needle = needle.replace("{t}", str(tmp_path))
    one_line_error(capsys, argv, tmp_path, (needle,))


def test_unknown_delegation_in_divergence(shard, tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["cim", "export", "--traces", str(shard.parent), "--out", str(store)]) == 0
    one_line_error(capsys, ["cim", "divergence", "--store", str(store), "--delegation",
                            "no-such-delegation"], tmp_path, ("delegation",))


def test_zz_report_case_count():
    """Prints how many bad-input cases this module ran (all of them passed to get here)."""
    print(f"\nbad-input cases run: {CASES['run']}")
    assert CASES["run"] > 0
