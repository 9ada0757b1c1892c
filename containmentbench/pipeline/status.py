"""Shard status of one model's run: done, errored, failed, interrupted, missing and corrupt.

* done: the shard folder holds ``SHA256SUMS`` and every file matches it;
* stale: finished and intact, but written under another shard key (the model, backend,
  defense or runtime configuration changed since): the next run redoes it;
* corrupt: the folder is finished but a file's bytes differ from ``SHA256SUMS`` (the next
  run moves it to ``quarantine/`` and redoes it);
* errored: the last run of the shard ended with more provider errors than
  ``study.max_error_rate`` allows (no ``SHA256SUMS`` was written; a rerun redoes it);
* failed: not done, and the last run of its job stopped on an error of its own: the job's
  log ends in the CLI's one-line error (``containmentbench: error: ...``) or a traceback;
* interrupted: not done, and a run was attempted that stopped without an error of its own
  (a temporary folder a killed job left behind, a job log without an error -- Ctrl-C, kill,
  a time limit, a lost node -- or an earlier corrupt copy in quarantine); a rerun redoes it
  (it was listed as ``failed`` before, which sent users looking for an error that was not
  there);
* missing: never attempted.

Besides the plan's shards, ``dropped`` lists the finished shard folders under ``traces/`` that
the study no longer plans (a defense, stage or seed removed): no metrics read them, and the
next run moves them to ``retired/`` (``pipeline/preflight.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.integrity import safeopen
from containmentbench.pipeline.mixing import SHARD_RECORD
from containmentbench.pipeline.plan import (
    Job,
    Shard,
    errored_marker,
    jobs,
    run_dir,
    shard_key,
    trace_dir,
)
from containmentbench.trace.io import CHECKSUMS, shard_dirs, verify_shard

STATES = ("done", "stale", "errored", "failed", "interrupted", "missing", "corrupt")
#: how much of the end of a job log is read for its error (the error is its last lines)
LOG_TAIL = 64 << 10
#: what a job that stopped on its own error leaves at the end of its log (cli/main.py prints
#: the first for every handled error, Python the second for any other)
ERROR_MARKS = ("containmentbench: error:", "Traceback (most recent call last):")
#: not a state of a planned shard: finished folders under traces/ the plan does not list
DROPPED = "dropped"


def shard_status(data: dict[str, Any], s: Shard, job_logged: bool | str = False) -> str:
    """The state of shard ``s`` (``STATES``). ``job_logged``: whether its job has a rollout
    log, or that log's outcome (``failed`` or ``interrupted``, :func:`_job_outcome`)."""
    root = run_dir(data)
    d = root / "traces" / s.id
    if (d / CHECKSUMS).exists():
        if verify_shard(d):
            return "corrupt"
        return "done" if _key_of(d) in (None, shard_key(data, s)) else "stale"
    if errored_marker(data, s).exists():
        return "errored"
    if job_logged == "failed":
        return "failed"
    attempted = bool(job_logged)
    attempted |= any(d.parent.glob(f".{d.name}.tmp-*")) if d.parent.exists() else False
    attempted |= (root / "quarantine").exists() and any(
        (root / "quarantine").glob(f"{s.id}.*"))
    return "interrupted" if attempted else "missing"


def stale_reasons(data: dict[str, Any], shard_ids: list[str]) -> dict[str, list[str]]:
    """Why stale shards are stale, when their ``SHARD.json`` says: ``defense X's code``,
    ``defense X's configuration``, ``serving KEY (old -> new)`` (the serving record,
    models/serving.py: another engine, version, parser, template, quantization, decoding or
    tool mode), or ``other settings`` (model, backend, runtime, suite) -> shard ids. A
    defense under development shows up here by name after an edit."""
    from containmentbench.canonical import sha256_json
    from containmentbench.defense.identity import defense_identity
    from containmentbench.integrity.inputs import load_json
    from containmentbench.pipeline.plan import shard_by_id

    out: dict[str, list[str]] = {}
    for sid in shard_ids:
        s = shard_by_id(data, sid)
        try:
            rec = load_json(trace_dir(data) / sid / SHARD_RECORD, "shard_record")
        except (OSError, BenchError):
            rec = {}
        old = rec.get("defense") or {}
        why = []
        for lay in defense_identity(s.defense, data["defenses"])["layers"]:
            was = old.get(lay["key"])
            if was is None:
                continue
            if was["code"] != lay["code"]:
                why.append(f"defense {lay['key']}'s code")
            if was["config"] != sha256_json(lay["config"]):
                why.append(f"defense {lay['key']}'s configuration")
        was_serving = rec.get("serving")
        if isinstance(was_serving, dict):
            from containmentbench.models.serving import differences, record

            for key, (a, b) in differences(was_serving, record(data)).items():
                why.append(f"serving {key} ({_short(a)} -> {_short(b)})")
        for w in why or ["other settings (model, backend, runtime, suite or scenarios)"]:
            out.setdefault(w, []).append(sid)
    return out


def _short(value: Any) -> str:
    """A serving value as status prints it (a template hash cut to 12 hex digits)."""
    if isinstance(value, str) and len(value) == 64:
        return value[:12]
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)


def _key_of(d: Path) -> str | None:
    """The shard key recorded in ``SHARD.json`` (None for a shard written without one)."""
    from containmentbench.integrity.inputs import load_json

    try:  # unreadable or wrong-shaped: no key, so the shard is not current and is redone
        return load_json(d / SHARD_RECORD, "shard_record")["key"]
    except (OSError, BenchError):
        return None


def _job_log(data: dict[str, Any], j: Job) -> Path | None:
    """The newest rollout log of the job, of any marker generation (``<job>[.redo-<n>].log``)."""
    logs = run_dir(data) / "logs" / "rollout"
    if not logs.is_dir():
        return None
    found = [p for p in logs.iterdir() if p.suffix == ".log" and (
        p.name == f"{j.name}.log" or p.name.startswith(f"{j.name}.redo-"))]
    return max(found, key=lambda p: (p.stat().st_mtime_ns, p.name)) if found else None


def _job_outcome(data: dict[str, Any], j: Job) -> str | bool:
    """``failed`` when the job's newest log ends on an error of its own (:data:`ERROR_MARKS`
    in its last :data:`LOG_TAIL` bytes), ``interrupted`` when it has a log without one,
    False without a log."""
    log = _job_log(data, j)
    if log is None:
        return False
    # through the safe open (integrity/safeopen.py): a FIFO or a link in a log's place is one
    # line, never a status that waits for a writer
    fd, st = safeopen.open_regular(log, what="job log", follow=False)
    try:
        os.lseek(fd, max(0, st.st_size - LOG_TAIL), os.SEEK_SET)
        tail = os.read(fd, LOG_TAIL).decode("utf-8", "replace")
    except OSError:
        return "interrupted"
    finally:
        os.close(fd)
    if tail.rstrip().endswith("KeyboardInterrupt"):  # Ctrl-C before the CLI's own handler
        return "interrupted"
    return "failed" if any(m in tail for m in ERROR_MARKS) else "interrupted"


def study_status(data: dict[str, Any]) -> dict[str, list[str]]:
    """Shard ids per state (``STATES``), and the ``dropped`` folders (``DROPPED``)."""
    out: dict[str, list[str]] = {k: [] for k in STATES}
    planned = set()
    for j in jobs(data):
        logged = _job_outcome(data, j)
        for s in j.shards:
            planned.add(s.id)
            out[shard_status(data, s, logged)].append(s.id)
    root = trace_dir(data)
    out[DROPPED] = [] if not root.is_dir() else [
        i for i in (d.relative_to(root).as_posix() for d in shard_dirs(root, verify=False))
        if i not in planned]
    return out


def study_throughput(data: dict[str, Any]) -> dict[str, Any]:
    """The throughput of the study's planned rollout jobs, from their records (the last run
    of each that ran shards; ``pipeline/throughput.py``): ``jobs`` (job name -> figures)
    and ``study`` (their pooled figures, None before any job ran)."""
    from containmentbench.pipeline.throughput import job_records, pooled

    recs = job_records(run_dir(data), [j.name for j in jobs(data)])
    return {"jobs": recs, "study": pooled(recs.values())}
