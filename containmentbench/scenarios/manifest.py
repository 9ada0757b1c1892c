"""Scenario manifests: one canonical-JSON line per scenario, per stage, plus a hash manifest.

Layout of ``scenarios/<suite>/``::

    security.jsonl  memory_recovery.jsonl  active_tainted.jsonl  clean.jsonl
    MANIFEST.json   # suite, seed, generator version, per-stage counts and file hashes,
                    # and the sha256 of every scenario's canonical JSON

Reading validates every record (file, line and field named in a one-line error) and, with
``verify=True``, fails if a record or file no longer matches the committed hashes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json, sha256_bytes, sha256_json
from containmentbench.errors import BenchError, ValidationError
from containmentbench.scenarios.model import STAGES, Scenario

# 1.1: goals name every item their plans read (em-1 names the carrier it points to), and
# injected sentences name every value of their attack step (scenarios/literal.py)
GENERATOR_VERSION = "1.1"
MANIFEST = "MANIFEST.json"


def stage_file(stage: str) -> str:
    return f"{stage}.jsonl"


def render_suite(suite: str, seed: int | None, records: dict[str, list[dict[str, Any]]],
                 generator_version: str = GENERATOR_VERSION) -> dict[str, bytes]:
    """File name -> bytes for a whole suite (JSONL per stage and the manifest). A suite
    built from a user's records (``scenarios build``, builder.py) has no seed and records
    the builder's version (``user-<n>``) as its ``generator_version``."""
    files: dict[str, bytes] = {}
    stages: dict[str, Any] = {}
    hashes: dict[str, str] = {}
    for stage in STAGES:
        if stage not in records:
            continue
        data = "".join(canonical_json(r) + "\n" for r in records[stage]).encode("utf-8")
        files[stage_file(stage)] = data
        stages[stage] = {"count": len(records[stage]), "file": stage_file(stage),
                         "sha256": sha256_bytes(data)}
        for r in records[stage]:
            hashes[r["id"]] = sha256_json(r)
    manifest = {"suite": suite, "generator_version": generator_version,
                "stages": stages, "scenarios": hashes,
                "total": sum(s["count"] for s in stages.values()),
                **({"seed": seed} if seed is not None else {})}
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def check_suite_out(out: Path, suite: str, force: bool = False) -> None:
    """A suite folder is written only where it is new, empty, or an earlier output of the
    same suite: a committed suite (``scenarios/smoke``) is never replaced by another suite,
    ``--force`` or not. Called before any work."""
    from containmentbench.integrity import writer

    out = Path(out)
    writer.check_out(out, "suite", force)
    try:
        held = json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("suite")
    except (OSError, ValueError, AttributeError):
        return
    if held is not None and held != suite and Path(str(held)).name != Path(suite).name:
        raise BenchError(f"holds the suite '{held}'; refusing to replace it with '{suite}' "
                         f"(--force or not): choose another folder", file=str(out),
                         field="out")


def _same_files(new: Path, old: Path) -> bool:
    names = sorted(p.name for p in new.iterdir() if not p.name.startswith("."))
    return names == sorted(p.name for p in old.iterdir() if not p.name.startswith(".")) and \
        all((new / n).read_bytes() == (old / n).read_bytes() for n in names)


def write_suite_files(out: Path, suite: str, files: dict[str, bytes], force: bool = False,
                      check: Any = None) -> str:
    """Write a suite folder as a whole (integrity.writer: an identical suite is kept, a
    different earlier one of the same suite replaced only with ``force`` and moved aside).
    ``check(folder)`` may return problems found in the built folder before it is put in
    place (the first one is a one-line error). Returns what happened, in words."""
    from containmentbench.integrity import writer

    check_suite_out(out, suite, force)
    with writer.building_dir(Path(out), "suite", force, identical=_same_files) as b:
        for name, data in files.items():
            b.put(name, data)
        problems = check(b.tmp) if check is not None else []
        if problems:
            raise BenchError(f"suite does not verify: {problems[0]}", file=str(out))
    return b.result


def read_manifest(directory: Path) -> dict[str, Any]:
    """The suite's ``MANIFEST.json``, its shape checked (integrity/schemas.py) and every stage
    entry naming its own ``<stage>.jsonl`` (a ``file`` entry is joined to the suite folder,
    so ``../x`` must never reach a path)."""
    from containmentbench.integrity.inputs import load_json

    path = directory / MANIFEST
    if not path.exists():
        raise BenchError(f"no {MANIFEST} in {directory}", file=str(path))
    data = load_json(path, "scenario_manifest")
    for stage, info in data["stages"].items():
        if stage not in STAGES:
            raise ValidationError(f"unknown stage '{stage}' (known: {', '.join(STAGES)})",
                                  file=str(path), field=f"stages.{stage}")
        if info["file"] != stage_file(stage):
            raise ValidationError(f"stage '{stage}' must be stored in '{stage_file(stage)}', "
                                  f"not {info['file']!r}", file=str(path),
                                  field=f"stages.{stage}.file")
    return data


def _lines(fh: Any, path: Path) -> Any:
    lineno = 0
    try:
        for lineno, line in enumerate(fh, start=1):
            yield lineno, line
    except UnicodeDecodeError:
        raise ValidationError("not UTF-8 text", file=str(path), line=lineno + 1) from None


def _records(path: Path) -> Any:
    """``(line number, parsed JSON)`` of every non-empty line; bad JSON names file and line."""
    with open(path, encoding="utf-8", errors="strict") as fh:
        for lineno, line in _lines(fh, path):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"not valid JSON ({exc.msg})", file=str(path),
                                      line=lineno) from None
            except RecursionError:
                raise ValidationError("JSON nested too deeply", file=str(path),
                                      line=lineno) from None


def jsonl_records(path: Path) -> Any:
    """``(line number, parsed JSON)`` of every non-empty line of a JSONL file (bad JSON or
    text that is not UTF-8: one line naming file and line)."""
    return _records(path)


def read_stage(path: Path) -> list[Scenario]:
    """Parse and validate one stage file; errors name file, line and field."""
    out: list[Scenario] = []
    seen: set[str] = set()
    for lineno, record in _records(path):
        sc = _validate(record, path, lineno)
        if sc.id in seen:
            raise ValidationError(f"duplicate scenario id '{sc.id}'", file=str(path),
                                  line=lineno, field="id")
        seen.add(sc.id)
        out.append(sc)
    return out


def verify_suite(directory: Path) -> list[str]:
    """Drift check: every stage file and scenario must match the committed hashes.
    Returns the list of problems (empty when the manifest holds)."""
    manifest = read_manifest(directory)
    problems: list[str] = []
    seen: set[str] = set()
    for info in manifest["stages"].values():
        path = directory / info["file"]
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        if sha256_bytes(path.read_bytes()) != info["sha256"]:
            problems.append(f"{path}: file hash differs from {MANIFEST}")
        scenarios = read_stage(path)
        if len(scenarios) != info["count"]:
            problems.append(f"{path}: {len(scenarios)} scenarios, manifest says {info['count']}")
        for sc in scenarios:
            seen.add(sc.id)
            want = manifest["scenarios"].get(sc.id)
            if want is None:
                problems.append(f"{path}: scenario {sc.id} not in {MANIFEST}")
            elif want != sc.hash:
                problems.append(f"{path}: scenario {sc.id} hash differs from {MANIFEST}")
    for sid in sorted(set(manifest["scenarios"]) - seen):
        problems.append(f"{directory}: scenario {sid} in {MANIFEST} but in no stage file")
    return problems


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


#: suite folders named by path in this process or a parent (``study.suite=DIR``), joined by
#: ``os.pathsep``: later steps (metrics, report, freeze) find a suite by the name its records
#: carry, and the Snakemake rules' and jobs' processes inherit the variable
SUITES_ENV = "CONTAINMENTBENCH_SUITES"


def _register(folder: Path) -> None:
    path = str(folder.resolve())
    known = [x for x in os.environ.get(SUITES_ENV, "").split(os.pathsep) if x]
    if path not in known:
        os.environ[SUITES_ENV] = os.pathsep.join([*known, path])


def _registered(name: str) -> Path | None:
    """A folder of :data:`SUITES_ENV` whose name, or whose manifest's ``suite``, is ``name``."""
    for x in os.environ.get(SUITES_ENV, "").split(os.pathsep):
        f = Path(x)
        if not x or not (f / MANIFEST).is_file():
            continue
        if f.name == name:
            return f
        try:
            if json.loads((f / MANIFEST).read_text(encoding="utf-8")).get("suite") == name:
                return f
        except (OSError, ValueError, AttributeError):
            continue
    return None


def suite_dir(suite: str | Path) -> Path:
    """Resolve a suite name or folder: an existing folder (remembered in
    ``$CONTAINMENTBENCH_SUITES``, so its name resolves later and in child processes),
    ``./scenarios/<suite>``, the committed suite beside the package
    (``$CONTAINMENTBENCH_SCENARIOS`` overrides), or last a remembered folder of that name (so
    a copy never shadows a committed suite)."""
    p = Path(suite)
    if p.is_dir() and (p / MANIFEST).exists():
        _register(p)
        return p
    roots = [Path(os.environ["CONTAINMENTBENCH_SCENARIOS"])] \
        if os.environ.get("CONTAINMENTBENCH_SCENARIOS") else []
    roots += [Path.cwd() / "scenarios", repo_root() / "scenarios"]
    for root in roots:
        cand = root / str(suite)
        if (cand / MANIFEST).exists():
            return cand
    # last: a remembered folder never shadows a committed suite of the same name
    found = _registered(str(suite))
    if found is not None:
        return found
    raise BenchError(f"scenario suite '{suite}' not found (looked in "
                     f"{', '.join(str(r) for r in roots)}; a suite elsewhere is named by "
                     f"its folder: study.suite=DIR, or ${SUITES_ENV}=DIR)", field="suite")


def suite_label(suite: str | Path) -> str:
    """A suite as one plain file name: a committed suite's name, or the folder name of a
    suite given as a path (``study.suite=/data/my_suite`` -> ``my_suite``), characters
    outside ``[A-Za-z0-9_.-]`` replaced by ``_``."""
    name = Path(str(suite)).name or "suite"
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in name).lstrip(".") or "suite"


# Stage files of this process: path -> (signature, {id: (line, record)}, {id: Scenario}). A
# rollout job runs many shards of one suite and the metrics need every scenario, so each file
# is parsed once per process and each scenario validated once, when first asked for (a job
# that runs a few scenarios of a stage validates those alone); the signature (size, mtime and
# inode) makes an edited or regenerated file parse afresh. ``suite_index`` serves the planner
# the ids alone, without validation. Errors still name the file, line and field.
_STAGES: dict[str, tuple[tuple[int, int, int], dict[str, tuple[int, Any]],
                         dict[str, Scenario]]] = {}


def _signature(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BenchError("stage file missing", file=str(path)) from None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _stage(path: Path) -> tuple[tuple[int, int, int], dict[str, tuple[int, Any]],
                                dict[str, Scenario]]:
    key, sig = str(path.resolve()), _signature(path)
    hit = _STAGES.get(key)
    if hit is None or hit[0] != sig:
        hit = _STAGES[key] = (sig, _index_records(path), {})
    return hit


def _scenario(path: Path, sid: str) -> Scenario:
    _, raw, valid = _stage(path)
    sc = valid.get(sid)
    if sc is None:
        lineno, record = raw[sid]
        sc = valid[sid] = _validate(record, path, lineno)
    return sc


def _stages(suite: str | Path, stage: str | None) -> list[tuple[str, Path]]:
    directory = suite_dir(suite)
    manifest = read_manifest(directory)
    if stage is not None and stage not in manifest["stages"]:
        raise BenchError(f"suite '{suite}' has no stage '{stage}'", field="stage")
    return [(st, directory / manifest["stages"][st]["file"]) for st in STAGES
            if st in manifest["stages"] and (stage is None or st == stage)]


def load_suite(suite: str | Path, stage: str | None = None) -> list[Scenario]:
    """All validated scenarios of a suite (optionally one stage), in manifest order
    (cached per process; Scenario objects are immutable, the list is a fresh copy)."""
    return [_scenario(path, sid) for _, path in _stages(suite, stage) for sid in _stage(path)[1]]


def _index_records(path: Path) -> dict[str, tuple[int, Any]]:
    out: dict[str, tuple[int, Any]] = {}
    for lineno, record in _records(path):
        sid = record.get("id") if isinstance(record, dict) else None
        if not isinstance(sid, str):
            # the full validation names the field
            _validate(record, path, lineno)
            raise ValidationError("missing", file=str(path), line=lineno, field="id")
        if sid in out:
            raise ValidationError(f"duplicate scenario id '{sid}'", file=str(path),
                                  line=lineno, field="id")
        out[sid] = (lineno, record)
    return out


def _validate(record: Any, path: Path, lineno: int) -> Scenario:
    try:
        sc = Scenario.from_dict(record)
    except ValidationError as exc:
        raise ValidationError(exc.detail, file=str(path), line=lineno,
                              field=exc.field) from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise ValidationError(f"malformed record ({type(exc).__name__}: {exc})",
                              file=str(path), line=lineno) from None
    if sc.stage != path.stem:
        raise ValidationError(f"stage '{sc.stage}' in file for '{path.stem}'",
                              file=str(path), line=lineno, field="stage")
    return sc


# stage files whose bytes were checked against the suite manifest in this process:
# resolved path -> signature (size, mtime, inode) when checked
_CHECKED: dict[str, tuple[int, int, int]] = {}


def check_stage_files(suite: str | Path, stage: str | None = None) -> None:
    """Refuse (one line naming the file) a stage file whose bytes no longer match the sha256
    its suite's ``MANIFEST.json`` records: a rollout on an edited suite would otherwise run
    scenarios other than the ones the study, its keys and its tables name. Each file is
    hashed once per process while it is unchanged (a 1.6 MB stage file: a few ms)."""
    directory = suite_dir(suite)
    manifest = read_manifest(directory)
    for st, path in _stages(directory, stage):
        key, sig = str(path.resolve()), _signature(path)
        if _CHECKED.get(key) == sig:
            continue
        if sha256_bytes(path.read_bytes()) != manifest["stages"][st]["sha256"]:
            raise BenchError(f"stage file no longer matches its suite's {MANIFEST} (edited "
                             f"after the suite was frozen): {rebuild_hint(directory, manifest)}",
                             file=str(path))
        _CHECKED[key] = sig


def rebuild_hint(directory: Path, manifest: dict[str, Any]) -> str:
    """What to run on a suite whose files drifted from its manifest: a committed generator
    suite is regenerated by ``scenarios freeze``; any edited folder (a built suite, or an
    edited copy of a committed one) is re-checked and re-hashed by ``scenarios build``."""
    build = (f"`containmentbench scenarios build --from {directory} --out NEW_FOLDER` "
             f"checks and re-hashes the edited records")
    name = str(manifest.get("suite", ""))
    committed = repo_root() / "scenarios" / name
    if name and Path(directory).resolve() == committed.resolve():
        return f"`containmentbench scenarios freeze --suite {name}` regenerates it; {build}"
    return build


def load_scenarios(suite: str | Path, stage: str | None, ids: Sequence[str]) -> list[Scenario]:
    """The validated scenarios ``ids`` of a suite (optionally one stage), in the order asked,
    validating only those (what a job running one shard needs). Unknown ids: one-line error.
    The stage files must match the suite manifest (:func:`check_stage_files`): this is what
    every rollout reads its scenarios with."""
    check_stage_files(suite, stage)
    found: dict[str, Scenario] = {}
    for _, path in _stages(suite, stage):
        raw = _stage(path)[1]
        for sid in ids:
            if sid not in found and sid in raw:
                found[sid] = _scenario(path, sid)
    missing = [sid for sid in ids if sid not in found]
    if missing:
        raise BenchError(f"unknown scenario id '{missing[0]}' in suite '{suite}'"
                         + (f" stage '{stage}'" if stage else ""), field="scenarios")
    return [found[sid] for sid in ids]


def suite_index(suite: str | Path) -> list[tuple[str, str]]:
    """``(stage, scenario id)`` of every scenario in manifest order, read without validating
    the records: what the shard planner needs (each rollout validates its own scenarios with
    ``load_suite``, and the ``scenarios`` rule checks the whole suite first)."""
    return [(st, sid) for st, path in _stages(suite, None) for sid in _stage(path)[1]]
