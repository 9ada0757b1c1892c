"""Shard status of a study: done, failed, missing and corrupt.

* done: the shard folder holds ``SHA256SUMS`` and every file matches it;
* corrupt: the folder is finished but a file's bytes differ from ``SHA256SUMS`` (the next
  run moves it to ``quarantine/`` and redoes it);
* failed: not done, and a run was attempted (a temporary folder a killed job left behind, a
  rollout log, or an earlier corrupt copy in quarantine);
* missing: never attempted.
"""

from __future__ import annotations

from typing import Any

from containmentbench.pipeline.plan import Shard, shards, study_dir
from containmentbench.trace.io import CHECKSUMS, verify_shard


def shard_status(data: dict[str, Any], s: Shard) -> str:
    root = study_dir(data)
    d = root / "traces" / s.id
    if (d / CHECKSUMS).exists():
        return "corrupt" if verify_shard(d) else "done"
    attempted = any(d.parent.glob(f".{d.name}.tmp-*")) if d.parent.exists() else False
    attempted |= (root / "logs" / "rollout" / f"{s.id}.log").exists()
    attempted |= (root / "quarantine").exists() and any(
        (root / "quarantine").glob(f"{s.id}.*"))
    return "failed" if attempted else "missing"


def study_status(data: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"done": [], "failed": [], "missing": [], "corrupt": []}
    for s in shards(data):
        out[shard_status(data, s)].append(s.id)
    return out

