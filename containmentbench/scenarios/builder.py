"""``containmentbench scenarios build``: a suite from a user's own records.

The input is a JSONL file of records, minimal ones (``user_records.py``) or full ones (a line
of a suite's stage file, recognised by its ``schema_version``), or a suite folder whose stage
files were edited. Every record is validated (one line naming file, line, id and field),
then the two checks every committed suite passes run on the built scenarios:

* the literal-reader check (``literal.py``): no plan step needs a value its agent was never
  shown;
* the positive control (``selfcheck.py``): the reference plan satisfies the oracle and
  commits no violation; the attacker plan commits the violation its injection asks for.

Both replay a scenario's plans, so they run on records that have a reference plan; a record
without one is built (a real model needs no plan) and named as unchecked in the summary (the
sim agent, which follows the reference plan, only gives its final answer on it).

Only when every record passes is the folder written, as a whole (``write_suite_files``: a
temporary folder renamed into place), with a ``MANIFEST.json`` like the committed suites'
(its ``generator_version`` is the builder's, ``user-<n>``). Bad input writes nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError, ValidationError
from containmentbench.scenarios.model import STAGES, Scenario


@dataclass
class Built:
    """The records of one build, where each came from, and what the checks found."""

    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    scenarios: list[Scenario] = field(default_factory=list)
    where: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (file, line)
    origin: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    literal_steps: int = 0
    checked: int = 0     # scenarios with a reference plan (positive control ran)
    unchecked: list[str] = field(default_factory=list)


def _fail(b: Built, sid: str, detail: str, fld: str | None) -> BenchError:
    file, line = b.where[sid]
    return ValidationError(f"record '{sid}': {detail}", file=file, line=line, field=fld)


def _inputs(src: Path) -> list[tuple[Path, int, Any]]:
    """(file, line, parsed JSON) of every record of a JSONL file or of a suite folder's stage
    files (the manifest is not read: its hashes are what an edited folder no longer has)."""
    from containmentbench.scenarios.manifest import jsonl_records, stage_file

    if src.is_dir():
        files = [src / stage_file(st) for st in STAGES if (src / stage_file(st)).is_file()]
        if not files:
            raise BenchError(f"holds no stage file ({', '.join(map(stage_file, STAGES))})",
                             file=str(src), field="from")
    elif src.is_file():
        files = [src]
    else:
        raise BenchError("no such file or folder", file=str(src), field="from")
    out = [(f, n, rec) for f in files for n, rec in jsonl_records(f)]
    if not out:
        raise BenchError("holds no record", file=str(src), field="from")
    return out


_PLAN_FIELD = re.compile(r"plans\.(\w+)\[(\d+)\](.*)")


def _minimal_field(fld: str | None, origin: dict[str, list[str]]) -> str | None:
    """A full record's field in the minimal record's terms: ``plans.benign[1].args`` ->
    ``reference_plan[1].args``, ``initial_state.emails[0].to`` -> ``world.emails[0].to``."""
    if not fld:
        return fld
    m = _PLAN_FIELD.match(fld)
    if m and int(m.group(2)) < len(origin.get(m.group(1), [])):
        at = origin[m.group(1)][int(m.group(2))]
        return "injection.args" if at == "injection" and m.group(3).startswith(".args") \
            else at + m.group(3)
    if fld.startswith("initial_state."):
        return "world." + fld[len("initial_state."):]
    return fld


def read_records(src: Path, suite: str) -> Built:
    """Validate and expand every record (no check replayed yet)."""
    from containmentbench.scenarios.user_records import expand

    b = Built()
    for path, line, rec in _inputs(src):
        sid = rec.get("id") if isinstance(rec, dict) else None
        label = sid if isinstance(sid, str) else f"line {line}"
        try:
            if not isinstance(rec, dict):
                raise ValidationError("a record must be a JSON object", field="record")
            if "schema_version" in rec:  # a full record (an edited suite's line)
                # it joins this suite: later steps find a scenario by its record's suite
                full = {**rec, "suite": suite}
                origin = {p: [f"plans.{p}[{i}]" for i in range(len(steps))]
                          for p, steps in (rec.get("plans") or {}).items()
                          if isinstance(steps, list)}
            else:
                full, origin = expand(rec, suite)
            try:
                sc = Scenario.from_dict(full)
            except ValidationError as exc:
                if "schema_version" not in rec:  # name the field the user wrote
                    exc.field = _minimal_field(exc.field, origin)
                raise
        except ValidationError as exc:
            raise ValidationError(f"record '{label}': {exc.detail}", file=str(path),
                                  line=line, field=exc.field) from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ValidationError(f"record '{label}': malformed ({type(exc).__name__}: "
                                  f"{exc})", file=str(path), line=line) from None
        if sc.id in b.where:
            raise ValidationError(f"duplicate scenario id '{sc.id}' (first on line "
                                  f"{b.where[sc.id][1]})", file=str(path), line=line,
                                  field="id")
        b.where[sc.id] = (str(path), line)
        b.origin[sc.id] = origin
        b.records.setdefault(sc.stage, []).append(full)
        b.scenarios.append(sc)
    return b


def run_checks(b: Built) -> None:
    """The literal-reader check and the positive control on every scenario that has a
    reference plan; the first failure is a one-line error naming record and field."""
    from containmentbench.scenarios.literal import check_literal
    from containmentbench.scenarios.selfcheck import check

    planned = [s for s in b.scenarios if s.benign_plan]
    b.unchecked = [s.id for s in b.scenarios if not s.benign_plan]
    b.checked = len(planned)
    if not planned:
        return
    literal = check_literal(planned)
    b.literal_steps = literal.steps
    for h in literal.hidden:
        origin = b.origin[h.scenario_id].get(h.plan, [])
        at = origin[h.index] if h.index < len(origin) else f"plans.{h.plan}[{h.index}]"
        where = at if at == "injection" else f"{at}.args"
        raise _fail(b, h.scenario_id, f"the {h.plan} plan needs {h.field}={h.value!r}, "
                    f"which {h.agent} was never shown (its goal, the tools and what earlier "
                    f"steps read must name it: a model that reads literally cannot write it)",
                    f"{where}.{h.field}" if at != "injection" else f"injection.args.{h.field}")
    for r in check(planned):
        for prob in r.problems:
            if prob.startswith("attacker plan"):
                fld = "attacker_plan" if "attacker_plan" in str(b.origin[r.scenario_id].get(
                    "attacker", [])) else "injection"
            else:
                fld = "reference_plan" if "reference_plan" in str(b.origin[r.scenario_id].get(
                    "benign", [])) else "plans.benign"
            raise _fail(b, r.scenario_id, f"positive control: {prob}", fld)


def build(src: Path, out: Path, suite: str | None = None, force: bool = False
          ) -> tuple[Built, str, str]:
    """Read, check and write the suite; returns what was built, what happened at ``out``
    (in words) and the manifest's sha256. Nothing is written unless every record passes."""
    from containmentbench.canonical import sha256_bytes
    from containmentbench.scenarios.manifest import (
        MANIFEST,
        check_suite_out,
        render_suite,
        repo_root,
        verify_suite,
        write_suite_files,
    )
    from containmentbench.scenarios.user_records import BUILDER_VERSION

    name = suite or Path(out).resolve().name
    if (repo_root() / "scenarios" / name).is_dir():
        # later steps find a suite by the name its records carry: never a committed one's
        raise BenchError(f"'{name}' is the name of a committed suite; give the build another "
                         f"name (--name, or another --out folder name)", field="name")
    check_suite_out(out, name, force)  # before any work: a folder we may not replace
    b = read_records(Path(src), name)
    run_checks(b)
    files = render_suite(name, None, {st: b.records[st] for st in STAGES if st in b.records},
                         generator_version=BUILDER_VERSION)
    what = write_suite_files(out, name, files, force, check=verify_suite)
    return b, what, sha256_bytes(files[MANIFEST])


def summary(b: Built, out: Path, what: str, digest: str) -> str:
    """What the verb prints: counts, the checks, and how to run a study on the suite."""
    counts = ", ".join(f"{st}={len(b.records[st])}" for st in STAGES if st in b.records)
    where = out.resolve()
    lines = [f"{out}: {what}: {counts} ({len(b.scenarios)} scenarios); MANIFEST.json "
             f"sha256 {digest}",
             f"literal reader: {b.literal_steps} plan steps checked, 0 need a value their "
             f"agent was not shown",
             f"positive control: {b.checked}/{len(b.scenarios)} scenarios checked and pass"
             + (f"; {len(b.unchecked)} without a reference plan, unchecked (the sim agent "
                f"only answers on them): {', '.join(b.unchecked)}" if b.unchecked else ""),
             "run a study on it (the sim agent; add backend=... model=... for a real one):",
             f"  containmentbench run study=smoke study.suite={where} 'study.seeds=[1]'",
             f"  snakemake --cores 2 --config study=smoke "
             f"'overrides=[study.suite={where},study.seeds=[1]]'"]
    return "\n".join(lines)


def as_json(b: Built, out: Path, what: str, digest: str) -> str:
    return json.dumps({"out": str(out), "result": what, "manifest_sha256": digest,
                       "counts": {st: len(b.records[st]) for st in b.records},
                       "literal_steps": b.literal_steps, "checked": b.checked,
                       "unchecked": b.unchecked}, indent=2, sort_keys=True)
