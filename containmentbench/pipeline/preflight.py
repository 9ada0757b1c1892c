"""The Snakefile's pre-flight, split in two: a check that only reads, and the changes it
implies, made only once Snakemake reports a real run.

:func:`check_run` runs while the Snakefile is parsed, in every mode (a real run, ``-n`` in
any spelling or from a profile, ``--summary``, a run the lock will refuse): it reads every
shard of the plan (finished, intact, under the current shard key), the shard folders under
``traces/`` that the plan no longer lists, and retired copies that could come back. It
writes nothing; :func:`report` says what a run does about it.

The DAG shows that work without anything being deleted first: a rollout job whose shards
are not all current asks for the next generation of its marker
(``jobs/<job>.redo-<n>.done``, :class:`pipeline.plan.Job`), a path that does not exist yet,
so ``snakemake -n`` lists the job and everything downstream, and a real run reruns them. A
repaired job keeps asking for that generation, so the run after a repair has nothing to do.

:func:`apply` makes the changes. The Snakefile calls it from its ``onstart`` handler, which
Snakemake runs only in a real run (never in a dry run), after it holds the working
directory's lock and before the first job: a run the lock refuses writes nothing. It saves
the resolved config and the plan, moves corrupt shards to ``quarantine/`` and shards the
study no longer lists to ``retired/`` (kept, never deleted), and moves a retired shard back
when the study lists it again and it is intact and of the current key.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from containmentbench.integrity import writer
from containmentbench.pipeline.mixing import SHARD_RECORD
from containmentbench.pipeline.plan import (
    Job,
    Shard,
    marker_generations,
    model_slug,
    run_dir,
    shard_key,
    trace_dir,
)
from containmentbench.trace.io import CHECKSUMS, shard_dirs, verify_shard

QUARANTINE = "quarantine"
RETIRED = "retired"


@dataclass
class RunCheck:
    """What one run's shards look like on disk, against its plan."""

    slug: str
    jobs: list[Job]                                        # with their marker generations
    corrupt: dict[str, list[str]] = field(default_factory=dict)  # id -> damaged file names
    stale: list[str] = field(default_factory=list)         # finished under another key
    missing: list[str] = field(default_factory=list)       # of a job that had a marker
    dropped: list[str] = field(default_factory=list)       # under traces/, not in the plan
    restore: dict[str, Path] = field(default_factory=dict)  # id -> retired copy to move back
    redo: list[Job] = field(default_factory=list)          # jobs whose marker moves on


def shard_state(data: dict[str, Any], s: Shard) -> tuple[str, list[str]]:
    """``current`` (finished, intact, same key), ``corrupt`` (with the damaged files),
    ``stale`` (intact, another key or none recorded) or ``missing``; the rollout job
    redoes every state but ``current`` (runtime.job.shard_is_current)."""
    return _state(data, s, trace_dir(data) / s.id)


def _state(data: dict[str, Any], s: Shard, d: Path) -> tuple[str, list[str]]:
    if not (d / CHECKSUMS).exists():
        return "missing", []
    bad = verify_shard(d)
    if bad:
        return "corrupt", [Path(b).name for b in bad]
    try:
        key = json.loads((d / SHARD_RECORD).read_text())["key"]
    except (OSError, ValueError, KeyError, TypeError):
        key = None
    return ("current", []) if key == shard_key(data, s) else ("stale", [])


def _retired_copy(data: dict[str, Any], s: Shard) -> Path | None:
    """The newest retired copy of ``s`` that is intact and of the current key."""
    base = run_dir(data) / RETIRED / s.id
    if not base.parent.is_dir():
        return None
    copies = []
    for p in base.parent.glob(f"{base.name}.*"):
        n = p.name[len(base.name) + 1:]
        if n.isdigit() and p.is_dir():
            copies.append((int(n), p))
    for _, p in sorted(copies, reverse=True):
        if _state(data, s, p)[0] == "current":
            return p
    return None


def check_run(data: dict[str, Any], jobs: list[Job]) -> RunCheck:
    """Read-only: the state of every shard of ``jobs`` and of ``traces/``, and each job's
    marker generation (the newest on disk while its shards are all current, else the next
    one; 0 when the job never wrote one)."""
    out = RunCheck(model_slug(data), [])
    planned: set[str] = set()
    for j in jobs:
        gens = marker_generations(data, j)
        healthy = True
        for s in j.shards:
            planned.add(s.id)
            state, bad = shard_state(data, s)
            if state == "current":
                continue
            healthy = False
            if state == "corrupt":
                out.corrupt[s.id] = bad
            elif state == "stale":
                out.stale.append(s.id)
            else:
                copy = _retired_copy(data, s)
                if copy is not None:
                    out.restore[s.id] = copy
                elif gens:
                    out.missing.append(s.id)
        if not gens:
            out.jobs.append(j)  # never finished: generation 0, its marker is missing
        elif healthy:
            out.jobs.append(replace(j, generation=gens[-1]))
        else:
            out.jobs.append(replace(j, generation=gens[-1] + 1))
            out.redo.append(out.jobs[-1])
    root = trace_dir(data)
    if root.is_dir():
        out.dropped = [i for i in (d.relative_to(root).as_posix()
                                   for d in shard_dirs(root, verify=False))
                       if i not in planned]
    return out


def report(check: RunCheck, dryrun: bool) -> None:
    """One line per finding on stderr (what a real run does; a dry run changes nothing)."""
    act = "a real run" if dryrun else "this run"

    def say(text: str) -> None:
        print(f"containmentbench: {text}", file=sys.stderr)

    for sid, bad in check.corrupt.items():
        say(f"corrupt shard {sid} ({', '.join(bad)} does not match {CHECKSUMS}): {act} moves "
            f"it to {QUARANTINE}/ and redoes it")
    if check.stale:
        say(f"{len(check.stale)} shard(s) finished under another shard key (settings, "
            f"scenario bytes or sim profile changed; first: {check.stale[0]}): {act} redoes "
            f"them")
    for sid in check.missing:
        say(f"shard {sid} is missing: {act} redoes it")
    for sid, copy in check.restore.items():
        say(f"shard {sid} is back in the study: {act} moves its intact copy back from {copy}")
    if check.dropped:
        say(f"{len(check.dropped)} shard(s) under traces/ are no longer part of the study "
            f"(first: {check.dropped[0]}): {act} moves them to {RETIRED}/ and rebuilds what "
            f"read them")
    for j in check.redo:
        say(f"rollout job {j.name} of {check.slug} runs again as {j.wildcard} (marker "
            f"jobs/{j.wildcard}.done): a shard of it is not finished, intact and of the "
            f"current key; it redoes only those")


def _free(base: Path) -> Path:
    n = 0
    while (cand := base.with_name(f"{base.name}.{n}")).exists():
        n += 1
    return cand


def _move(src: Path, dst: Path) -> None:
    """Move a shard or output aside (kept; integrity/writer.py); in a frozen study the files
    leaving a covered folder are journalled, so the re-freeze after the repair accepts it."""
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    for f in files:
        writer.replace_in_study(f, kind="quarantine")
    writer.move_aside(src, dst)


def apply(data: dict[str, Any], check: RunCheck) -> None:
    """The changes :func:`check_run` found, made in a real run that holds the lock. Each is
    checked again first (the state may have changed since the Snakefile was parsed)."""
    root = run_dir(data)
    by_id = {s.id: s for j in check.jobs for s in j.shards}
    for sid in check.corrupt:
        d = trace_dir(data) / sid
        if (d / CHECKSUMS).exists() and verify_shard(d):
            target = _free(root / QUARANTINE / sid)
            _move(d, target)
            print(f"containmentbench: corrupt shard {sid} moved to {target}; it will be "
                  f"redone", file=sys.stderr)
    for sid in check.dropped:
        d = trace_dir(data) / sid
        if d.is_dir() and sid not in by_id:
            _move(d, _free(root / RETIRED / sid))
    if check.dropped:
        print(f"containmentbench: {len(check.dropped)} shard(s) no longer in the study moved "
              f"to {root / RETIRED}", file=sys.stderr)
    for sid, copy in check.restore.items():
        d = trace_dir(data) / sid
        if not d.exists() and copy.is_dir() and _state(data, by_id[sid], copy)[0] == "current":
            _move(copy, d)
            print(f"containmentbench: shard {sid} moved back from {copy}", file=sys.stderr)


# outputs an adapter run computes from all its shards (workflow/rules/agentdojo.smk)
ADAPTER_DERIVED = ("metrics/rollout_metrics.parquet", "adapter/parity.json", "analysis.json",
                   "MANIFEST.json")


def repair_adapter_run(data: dict[str, Any], shards: list[Shard]) -> list[str]:
    """An adapter study (paper 000 §6.4) writes one shard per rule, its ``SHA256SUMS`` the
    rule's output, so no marker generation can ask Snakemake to redo one: in a real run
    (Snakemake's own dry-run setting is False) its corrupt shards are moved to
    ``quarantine/`` while the Snakefile is parsed and, when a shard is missing, the outputs
    computed from all shards are moved to ``quarantine/derived.<n>/`` (kept), so this run
    redoes the shard and everything downstream. Unlike our own studies, a run that the lock
    then refuses has made these moves."""
    root = run_dir(data)
    moved = []
    for s in shards:
        d = trace_dir(data) / s.id
        state, bad = _state(data, s, d)
        if state != "corrupt":
            continue
        target = _free(root / QUARANTINE / s.id)
        _move(d, target)
        print(f"containmentbench: corrupt shard {s.id} ({', '.join(bad)} does not match "
              f"{CHECKSUMS}); moved to {target}; it will be redone", file=sys.stderr)
        moved.append(s.id)
    if any(not (trace_dir(data) / s.id / CHECKSUMS).exists() for s in shards):
        present = [rel for rel in ADAPTER_DERIVED if (root / rel).is_file()]
        if present:
            target = _free(root / QUARANTINE / "derived")
            for rel in present:
                _move(root / rel, target / rel)
            print(f"containmentbench: shards are missing; {len(present)} derived output(s) "
                  f"moved to {target} so this run rebuilds them", file=sys.stderr)
    return moved
