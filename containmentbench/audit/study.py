"""``containmentbench audit run <run dir>``: the audit of every trace of a study run.

Reads the shards (never writes them), audits every sink, and writes new files under
``<run dir>/audit/``: ``sinks.parquet`` (one row per sink: flow class, tier, confidence,
sources, provenance path, logged taint, FIDES verdict), ``rollouts.parquet`` (the per-rollout
logged-vs-audited gap), ``dcpg.parquet`` (each rollout's graph and persisted registry as
JSON), ``summary.json`` and ``tables/audit_gap.*`` (the gap per stage and defense). ``freeze``
hashes them into the manifest. Counterfactual replays need a backend that reproduces a trace
from its seed (``sim``); for other backends the implicit analysis is reported as not run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from containmentbench.audit.auditor import (
    SinkAudit,
    collect,
    embed,
    judge_sinks,
    original_calls,
    probe_sinks,
    verdict,
)
from containmentbench.audit.policy import AuditPolicy
from containmentbench.audit.replay import Replayer
from containmentbench.audit.tables import gap_rows, gap_table
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.trace.io import by_rollout, read_table, shard_dirs

EV_COLS = ["rollout_id", "seq", "kind", "session", "agent_instance", "call_id", "tool", "args",
           "text", "labels", "tainted_fields", "resource_id", "resource_class"]
RO_COLS = ["rollout_id", "suite", "scenario_id", "scenario_hash", "stage", "defense", "model",
           "backend", "agent_profile", "seed", "status"]


class StudyReplay:
    """Builds a :class:`Replayer` for a rollout of a study run (sim backend only)."""

    def __init__(self, config: dict[str, Any], sinks: frozenset[str]) -> None:
        from containmentbench.runtime.job import runtime_config

        self.data = config
        self.sinks = sinks
        self.cfg = runtime_config(config)
        self._scen: dict[str, dict[str, Any]] = {}
        self._pol: dict[str, Any] = {}
        self._backends: dict[str, Any] = {}

    def __call__(self, row: dict[str, Any]) -> Replayer | None:
        from containmentbench.models.base import BackendConfig, make_backend
        from containmentbench.policies import load_policy
        from containmentbench.runtime.episode import RolloutSpec
        from containmentbench.scenarios.manifest import load_suite

        if row["backend"] != "sim":
            return None
        if row["suite"] not in self._scen:
            self._scen[row["suite"]] = {s.id: s for s in load_suite(row["suite"])}
        s = self._scen[row["suite"]].get(row["scenario_id"])
        if s is None or s.hash != row["scenario_hash"]:
            raise BenchError(f"scenario '{row['scenario_id']}' of rollout {row['rollout_id']} "
                             "is not the one the trace was made from", field="scenario_hash")
        if row["defense"] not in self._pol:
            self._pol[row["defense"]] = load_policy(row["defense"], self.data["defenses"])
        prof = row["agent_profile"] or "default"
        if prof not in self._backends:
            self._backends[prof] = make_backend(BackendConfig(
                name="sim", model=row["model"], max_tokens=self.cfg.max_tokens,
                temperature=self.cfg.temperature, options={"profile": prof}))
        spec = RolloutSpec(row["rollout_id"], self.data["study"]["name"], row["model"], "sim",
                           row["defense"], int(row["seed"]), row["agent_profile"])
        return Replayer(s, self._pol[row["defense"]], spec, self.cfg, self._backends[prof],
                        self.sinks)


def trace_shards(run_dir: Path) -> list[Path]:
    root = run_dir / "traces"
    dirs = shard_dirs(root) if root.exists() else []
    if not dirs:
        raise BenchError("no trace shards (run rollout first)", file=str(root), field="traces")
    return dirs


def shard_rollouts(d: Path) -> list[tuple[dict[str, Any], list[dict], list[dict]]]:
    """``(rollout row, events, edges)`` of every rollout of one shard."""
    out = []
    ro = read_table(d / "rollouts.parquet", "rollouts", RO_COLS).to_pylist()
    ev = by_rollout(read_table(d / "events.parquet", "events", EV_COLS))
    ed = by_rollout(read_table(d / "edges.parquet", "edges"))
    for r in ro:
        evs = ev.get(r["rollout_id"])
        if not evs:
            raise BenchError(f"rollout {r['rollout_id']} has no events", file=str(d),
                             field="events")
        if not any(e["kind"] in ("user_goal", "model_call") for e in evs):
            raise BenchError(f"rollout {r['rollout_id']} has no user_goal or model_call "
                             "events (not an agent trace)", file=str(d), field="events.kind")
        out.append((r, evs, ed.get(r["rollout_id"], [])))
    return out


def sink_record(s: SinkAudit, v: dict[str, Any]) -> dict[str, Any]:
    r = s.row
    return {"rollout_id": r["rollout_id"], "stage": r["stage"], "defense": r["defense"],
            "model": r["model"], "backend": r["backend"], "seed": r["seed"], "seq": s.seq,
            "tool": s.tool, "session": s.session, "lineages": len(s.pairs),
            "audited": v["audited"], "flow_class": v["flow_class"], "tier": v["tier"],
            "confidence": v["confidence"], "sources": v["sources"], "path": v["path"],
            "conjunctive": v["conjunctive"], "probed": s.probed, "replay_ok": s.replay_ok,
            "logged_node": s.logged_node, "logged_field": s.logged_field, "fides": s.fides}


KIND = "audit"
AUDIT_FILES = ("sinks.parquet", "rollouts.parquet", "dcpg.parquet", "summary.json")


def check_audit_out(run_dir: str | Path, out: str | Path | None, force: bool = False) -> Path:
    """The audit folder is new, empty or an earlier audit (in a frozen study only with
    ``force``): checked before any work."""
    out_dir = Path(out) if out else Path(run_dir) / "audit"
    writer.check_out(out_dir, KIND, force, accept=("folder",))
    for name in AUDIT_FILES:
        writer.check_file(out_dir / name, KIND, force)
    return out_dir


def _write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    t = pa.Table.from_pylist(rows, schema=schema)
    writer.write_bytes(path, writer.parquet_bytes(t, compression="zstd"), kind=KIND)


SINKS = pa.schema([("rollout_id", pa.string()), ("stage", pa.string()),
                   ("defense", pa.string()), ("model", pa.string()), ("backend", pa.string()),
                   ("seed", pa.int64()), ("seq", pa.int32()), ("tool", pa.string()),
                   ("session", pa.int32()), ("lineages", pa.int32()), ("audited", pa.bool_()),
                   ("flow_class", pa.string()), ("tier", pa.string()),
                   ("confidence", pa.float64()), ("sources", pa.list_(pa.string())),
                   ("path", pa.string()), ("conjunctive", pa.bool_()), ("probed", pa.bool_()),
                   ("replay_ok", pa.bool_()), ("logged_node", pa.bool_()),
                   ("logged_field", pa.bool_()), ("fides", pa.bool_())])
ROLLOUTS = pa.schema([("rollout_id", pa.string()), ("stage", pa.string()),
                      ("defense", pa.string()), ("model", pa.string()), ("seed", pa.int64()),
                      ("sinks", pa.int32()), ("audited", pa.int32()), ("logged", pa.int32()),
                      ("audited_not_logged", pa.int32()), ("logged_not_audited", pa.int32()),
                      ("fides", pa.int32()), ("replays", pa.int32())])
DCPG = pa.schema([("rollout_id", pa.string()), ("graph", pa.string())])


def audit_study(run_dir: str | Path, policy: AuditPolicy, emb: Any, replay: bool = True,
                out: str | Path | None = None, log: Any = sys.stderr,
                judge: Any = None) -> dict[str, Any]:
    run_dir = Path(run_dir)
    out_dir = check_audit_out(run_dir, out)
    t0 = time.perf_counter()
    dirs = trace_shards(run_dir)
    replayer_for = None
    cfg_path = run_dir / "config.yaml"
    if replay and cfg_path.exists():
        from containmentbench.config.compose import read_resolved
        replayer_for = StudyReplay(read_resolved(cfg_path), policy.sinks)
    th = policy.thresholds
    # one shard's events in memory at a time (a 50-seed study holds ~10 GB of events): what
    # the later passes need is kept per rollout (sinks, graph JSON, committed sink calls; the
    # events themselves only for the judge)
    per: list[tuple[dict[str, Any], list[dict] | None, list[SinkAudit], str, Any]] = []
    with writer.scratch_dir("cb-dcpg-") as state:
        for d in dirs:
            for row, evs, eds in shard_rollouts(d):
                g, sinks = collect(row, evs, eds, policy, state)
                per.append((row, evs if judge is not None and sinks else None, sinks,
                            json.dumps(g.to_json(), sort_keys=True),
                            original_calls(evs, policy.sinks)))
    rows = [r for r, *_ in per]
    models = sorted({r["model"] for r in rows})
    if len(models) > 1:
        raise BenchError(f"traces of {len(models)} models in one run directory ({models[0]}, "
                         f"{models[1]} ...): audit one model's run directory", field="model")
    t1 = time.perf_counter()
    all_sinks = [s for _, _, ss, _, _ in per for s in ss]
    embed(all_sinks, emb, policy, everything=False)
    t2 = time.perf_counter()
    replays = {}
    for row, evs, sinks, _, orig in per:
        rep = replayer_for(row) if replayer_for and sinks else None
        probe_sinks(sinks, rep, orig, th, everything=False)
        if rep is None and judge is not None and sinks:
            judge_sinks(sinks, judge, evs, th)
        replays[row["rollout_id"]] = rep.replays if rep else 0
    t3 = time.perf_counter()
    sink_rows = [sink_record(s, verdict(s, th)) for _, _, ss, _, _ in per for s in ss]
    roll_rows = gap_rows(rows, sink_rows, replays)
    writer.ensure_dir(out_dir, KIND)
    _write_parquet(out_dir / "sinks.parquet", sink_rows, SINKS)
    _write_parquet(out_dir / "rollouts.parquet", roll_rows, ROLLOUTS)
    _write_parquet(out_dir / "dcpg.parquet",
                   [{"rollout_id": r["rollout_id"], "graph": gj} for r, _, _, gj, _ in per], DCPG)
    written = gap_table(roll_rows, sink_rows, out_dir / "tables",
                        simulated=any(r["backend"] == "sim" for r in rows))
    summary = {"policy": policy.to_dict(), "policy_hash": policy.hash,
               "rollouts": len(rows), "sinks": len(sink_rows),
               "audited": sum(r["audited"] for r in sink_rows),
               "replays": sum(replays.values()),
               "implicit_analysis": "+".join(
                   [m for m, on in (("replay", replayer_for is not None and any(
                       r["backend"] == "sim" for r in rows)),
                                    ("judge", judge is not None)) if on])
                   or "not run (no replayable backend, no judge)",
               "judge_calls": judge.calls if judge is not None else 0,
               "judge_unparsed": judge.unparsed if judge is not None else 0,
               "simulated_agent": any(r["backend"] == "sim" for r in rows)}
    encoded = getattr(emb, "encoded", None)  # depends on the cache: logged, never hashed
    writer.write_json(out_dir / "summary.json", summary, kind=KIND)
    print(f"audit: {len(rows)} rollouts, {len(sink_rows)} sinks, {summary['audited']} "
          f"attributed, {summary['replays']} replays; dcpg+tiers 1-2 {t1 - t0:.1f} s, "
          f"embeddings {t2 - t1:.1f} s ({encoded} texts encoded), replays "
          f"{t3 - t2:.1f} s; wrote {out_dir} ({len(written)} table files)", file=log)
    return summary
