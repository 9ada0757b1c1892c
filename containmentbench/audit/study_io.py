"""The audit's files: where they go, their Arrow schemas, and the refusal of a foreign --out
before any work (through the one write path, ``integrity.writer``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from containmentbench.audit.auditor import SinkAudit
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.trace.io import shard_dirs

KIND = "audit"
AUDIT_FILES = ("sinks.parquet", "rollouts.parquet", "dcpg.parquet", "summary.json")

SINKS = pa.schema([("rollout_id", pa.string()), ("stage", pa.string()),
                   ("defense", pa.string()), ("model", pa.string()), ("backend", pa.string()),
                   ("seed", pa.int64()), ("seq", pa.int32()), ("tool", pa.string()),
                   ("session", pa.int32()), ("lineages", pa.int32()), ("audited", pa.bool_()),
                   ("flow_class", pa.string()), ("tier", pa.string()),
                   ("confidence", pa.float64()), ("sources", pa.list_(pa.string())),
                   ("path", pa.string()), ("conjunctive", pa.bool_()),
                   ("causal", pa.string()), ("probed", pa.bool_()),
                   ("replay_ok", pa.bool_()), ("logged_node", pa.bool_()),
                   ("logged_field", pa.bool_()), ("fides", pa.bool_()),
                   ("fides_conf", pa.bool_()),
                   # none | judge | replay_real | replay_sim_oracle (audit/auditor.py)
                   ("causal_source", pa.string()),
                   # a judge call that failed or answered malformed JSON (no judge verdict)
                   ("error", pa.string())])
ROLLOUTS = pa.schema([("rollout_id", pa.string()), ("stage", pa.string()),
                      ("defense", pa.string()), ("model", pa.string()), ("seed", pa.int64()),
                      ("sinks", pa.int32()), ("audited", pa.int32()), ("logged", pa.int32()),
                      ("audited_not_logged", pa.int32()), ("logged_not_audited", pa.int32()),
                      ("not_probed", pa.int32()), ("probed_no_cause", pa.int32()),
                      ("no_lineage", pa.int32()), ("fides", pa.int32()),
                      ("fides_conf", pa.int32()), ("replays", pa.int32())])
DCPG = pa.schema([("rollout_id", pa.string()), ("graph", pa.string())])


def trace_shards(run_dir: Path) -> list[Path]:
    root = run_dir / "traces"
    dirs = shard_dirs(root) if root.exists() else []
    if not dirs:
        raise BenchError("no trace shards (run rollout first)", file=str(root), field="traces")
    return dirs


def sink_record(s: SinkAudit, v: dict[str, Any]) -> dict[str, Any]:
    r = s.row
    return {"rollout_id": r["rollout_id"], "stage": r["stage"], "defense": r["defense"],
            "model": r["model"], "backend": r["backend"], "seed": r["seed"], "seq": s.seq,
            "tool": s.tool, "session": s.session, "lineages": len(s.pairs),
            "audited": v["audited"], "flow_class": v["flow_class"], "tier": v["tier"],
            "confidence": v["confidence"], "sources": v["sources"], "path": v["path"],
            "conjunctive": v["conjunctive"], "causal": v["causal"], "probed": s.probed,
            "replay_ok": s.replay_ok, "logged_node": s.logged_node,
            "logged_field": s.logged_field, "fides": s.fides, "fides_conf": s.fides_conf,
            "causal_source": s.causal_source, "error": s.error}


def check_audit_out(run_dir: str | Path, out: str | Path | None, force: bool = False) -> Path:
    """The audit folder is new, empty or an earlier audit (in a frozen study only with
    ``force``): checked before any work."""
    out_dir = Path(out) if out else Path(run_dir) / "audit"
    writer.check_out(out_dir, KIND, force, accept=("folder",))
    for name in AUDIT_FILES:
        writer.check_file(out_dir / name, KIND, force)
    return out_dir


def put_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    t = pa.Table.from_pylist(rows, schema=schema)
    writer.write_bytes(path, writer.parquet_bytes(t, compression="zstd"), kind=KIND)
