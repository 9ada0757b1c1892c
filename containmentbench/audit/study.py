"""``containmentbench audit run <run dir>``: the audit of every trace of a study run.

Reads the shards (never writes them), audits every sink, and writes new files under
``<run dir>/audit/``: ``sinks.parquet`` (one row per sink: flow class, deciding tier,
confidence, sources, provenance path, causal state, logged taint, FIDES verdicts),
``rollouts.parquet`` (the per-rollout logged-vs-audited gap), ``dcpg.parquet`` (each rollout's
graph and persisted registry as JSON, nodes with arguments, edges with tier and confidence),
``summary.json``, ``tables/audit_gap.*`` and ``tables/audit_overhead.*`` (§5.5). When the
run's suite is a labelled one (``LABELS.json``), every pair is scored by every tier and
probed, and the suite's scores go to ``tables/taintbench_*`` (:mod:`.suite_report`).
``freeze`` hashes all of it; ``reproduce`` rebuilds it and compares bytes (the overhead
table's wall-clock columns aside).

Counterfactual replays need a backend that reproduces a trace from its seed: the simulated
agent always; a real backend with per-request seeds (vLLM's seeded sampling) with
``replay_real`` (it loads the model). Every replay is checked first (a baseline replay must
reproduce the trace's sink calls): a sink that cannot be replayed is "not probed", never "no
cause". The simulated agent's replay is an oracle upper bound (:mod:`.replay`): each sink row
names its ``causal_source``, and the summary counts what the detector attributes without it
(``audited_without_oracle``) apart from what only the oracle adds (``audited_oracle_only``).

The §4.3 judge (:mod:`.judge`), when given, is probed once before any work (unreachable or
malformed: one line, exit 2, nothing written) and then asked every question of the run in one
batched call; a judge error is an error row (``error``, causal state ``error``), never a
verdict.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from containmentbench.audit.adapter import adapter_name, adapter_policy
from containmentbench.audit.auditor import (
    SinkAudit,
    annotate,
    collect,
    embed,
    judge_questions,
    judge_sinks,
    original_calls,
    probe_sinks,
    verdict,
)
from containmentbench.audit.dcpg import check_events
from containmentbench.audit.embed import MODEL_PACKAGE, package_version
from containmentbench.audit.policy import AuditPolicy
from containmentbench.audit.replay import Replayer
from containmentbench.audit.study_io import (
    AUDIT_FILES,
    DCPG,
    KIND,
    ROLLOUTS,
    SINKS,
    check_audit_out,
    put_parquet,
    sink_record,
    trace_shards,
)
from containmentbench.audit.tables import (
    gap_rows,
    gap_table,
    overhead_table,
    unit_cost_table,
)
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.trace.io import by_rollout, read_table

__all__ = ["AUDIT_FILES", "audit_study", "check_audit_out"]

EV_COLS = ["rollout_id", "seq", "kind", "session", "agent_instance", "call_id", "tool", "args",
           "text", "labels", "tainted_fields", "resource_id", "resource_class", "target",
           "action_semantic", "sensitivity_label", "principal_scope"]
RO_COLS = ["rollout_id", "suite", "scenario_id", "scenario_hash", "stage", "defense", "model",
           "backend", "agent_profile", "seed", "status"]
WALL_CLOCK_SUFFIXES = ("csv", "md", "parquet", "tex")
# event kinds the graph, the logged taint and the FIDES check read
GRAPH_KINDS = pa.array(["source", "session_start", "user_goal", "proposal", "tool_result",
                        "memory_read", "message", "commit"])
REPLAYABLE = frozenset({"sim", "scripted"})   # reproduce a trace from its seed, no model load


class StudyReplay:
    """Builds a :class:`Replayer` for a rollout of a study run."""

    def __init__(self, config: dict[str, Any], sinks: frozenset[str],
                 replay_real: bool = False) -> None:
        from containmentbench.runtime.job import runtime_config

        self.data = config
        self.sinks = sinks
        self.replay_real = replay_real
        self.cfg = runtime_config(config)
        self._scen: dict[str, dict[str, Any]] = {}
        self._pol: dict[str, Any] = {}
        self._backends: dict[str, Any] = {}

    def replayable(self, backend: str) -> bool:
        return backend in REPLAYABLE or self.replay_real

    def _backend(self, row: dict[str, Any]) -> Any:
        from containmentbench.models.base import BackendConfig, make_backend
        from containmentbench.runtime.job import backend_config

        key = f"{row['backend']}:{row['agent_profile'] or ''}"
        if key not in self._backends:
            if row["backend"] == "sim":
                prof = row["agent_profile"] or "default"
                b = make_backend(BackendConfig(
                    name="sim", model=row["model"], max_tokens=self.cfg.max_tokens,
                    temperature=self.cfg.temperature, options={"profile": prof}))
            else:
                b = make_backend(backend_config(self.data))
            self._backends[key] = b if getattr(b, "seed_supported", False) else None
        return self._backends[key]

    def __call__(self, row: dict[str, Any]) -> Replayer | None:
        from containmentbench.defense.loading import load_defense
        from containmentbench.runtime.episode import RolloutSpec
        from containmentbench.scenarios.manifest import load_suite

        if not self.replayable(row["backend"]):
            return None
        if row["suite"] not in self._scen:
            self._scen[row["suite"]] = {s.id: s for s in load_suite(row["suite"])}
        s = self._scen[row["suite"]].get(row["scenario_id"])
        if s is None or s.hash != row["scenario_hash"]:
            raise BenchError(f"scenario '{row['scenario_id']}' of rollout {row['rollout_id']} "
                             "is not the one the trace was made from", field="scenario_hash")
        backend = self._backend(row)
        if backend is None:
            return None
        if row["defense"] not in self._pol:
            self._pol[row["defense"]] = load_defense(row["defense"], self.data["defenses"])
        spec = RolloutSpec(row["rollout_id"], self.data["study"]["name"], row["model"],
                           row["backend"], row["defense"], int(row["seed"]),
                           row["agent_profile"])
        return Replayer(s, self._pol[row["defense"]], spec, self.cfg, backend, self.sinks)


def shard_rollouts(d: Path, everything: bool = False) -> list[tuple[dict[str, Any], list[dict]]]:
    """``(rollout row, events)`` of every rollout of one shard: the events the graph reads
    (model calls, decisions and the like only with ``everything``: the judge's history)."""
    import pyarrow.compute as pc

    out = []
    ro = read_table(d / "rollouts.parquet", "rollouts", RO_COLS).to_pylist()
    table = read_table(d / "events.parquet", "events", EV_COLS)
    if not everything:
        table = table.filter(pc.is_in(table["kind"], value_set=GRAPH_KINDS))
    ev = by_rollout(table)
    for r in ro:
        evs = ev.get(r["rollout_id"])
        if not evs:
            raise BenchError(f"rollout {r['rollout_id']} has no events", file=str(d),
                             field="events")
        if not any(e["kind"] == "user_goal" for e in evs):
            raise BenchError(f"rollout {r['rollout_id']} has no user_goal event (not an "
                             "agent trace)", file=str(d), field="events.kind")
        check_events(evs, str(d / "events.parquet"))
        out.append((r, evs))
    return out


def _canary(rep: Replayer, sinks: list[SinkAudit], orig: Any, sources: list[str]) -> int:
    """Tier 1 evidence from the instrumented replay; returns the pairs it found."""
    from containmentbench.audit.canary import canary_hits
    from containmentbench.canonical import canonical_json

    hits = canary_hits(rep, orig, sources)
    n = 0
    for s in sinks:
        found = (hits or {}).get((s.tool, canonical_json(s.args)), set())
        for p in s.pairs:
            if p.source_id in found:
                p.canary, n = 1.0, n + 1
    return n


def _labelled(rows: list[dict[str, Any]]) -> Any:
    """The labelled suite of the run (its folder and labels), or None."""
    from containmentbench.audit.suite_check import LABELS, check_label_file
    from containmentbench.scenarios.manifest import load_suite, suite_dir, verify_suite

    suites = sorted({r["suite"] for r in rows})
    if len(suites) != 1:
        return None
    try:
        folder = suite_dir(suites[0])
    except BenchError:
        return None
    if not (folder / LABELS).is_file():
        return None
    problems = verify_suite(folder)
    if problems:
        raise BenchError(f"labelled suite does not verify: {problems[0]}", file=str(folder))
    scen = load_suite(folder)
    return folder, check_label_file(folder, scen), {s.id: s for s in scen}


def audit_study(run_dir: str | Path, policy: AuditPolicy, emb: Any, replay: bool = True,
                out: str | Path | None = None, log: Any = None, judge: Any = None,
                replay_real: bool = False, canary: bool = False) -> dict[str, Any]:
    # the stream at call time: a default of sys.stderr bound whatever stream was current at
    # import (a closed capture after the first CLI test in one process)
    log = log if log is not None else sys.stderr
    run_dir = Path(run_dir)
    out_dir = check_audit_out(run_dir, out)
    if judge is not None:
        judge.probe()  # unreachable or malformed: one line naming the backend, before any work
    clock = {"dcpg": 0.0, "tier12": 0.0, "tier34": 0.0, "causal": 0.0}
    t0 = time.perf_counter()
    dirs = trace_shards(run_dir)
    replayer_for = None
    cfg_path = run_dir / "config.yaml"
    config = None
    if cfg_path.exists():
        from containmentbench.config.compose import read_resolved
        config = read_resolved(cfg_path)
    adapter = adapter_name(config)
    if adapter:  # an external benchmark's tools and tasks: its sinks, no replay
        policy = adapter_policy(policy, adapter)
    elif replay and config is not None:
        replayer_for = StudyReplay(config, policy.sinks, replay_real)
    th = policy.thresholds
    # one shard's events in memory at a time (a 50-seed study holds ~10 GB of events): what
    # the later passes need is kept per rollout (sinks, graph JSON, committed sink calls; the
    # events themselves only for the judge)
    per: list[tuple[dict[str, Any], list[dict] | None, list[SinkAudit], dict, Any]] = []
    # the registry and graph are persisted at each session boundary through their JSON form
    # in memory (dcpg.build): a scratch file per boundary cost more than the whole graph
    unit_ms: dict[str, dict[str, float]] = {}  # per rollout: wall time of each part
    for d in dirs:
        for row, evs in shard_rollouts(d, everything=judge is not None):
            u0 = time.perf_counter()
            g, sinks = collect(row, evs, policy, None, clock)
            unit_ms[row["rollout_id"]] = {"graph": 1000 * (time.perf_counter() - u0)}
            per.append((row, evs if judge is not None and sinks else None, sinks,
                        g.to_json(), original_calls(evs, policy.sinks)))
    rows = [r for r, *_ in per]
    models = sorted({r["model"] for r in rows})
    if len(models) > 1:
        raise BenchError(f"traces of {len(models)} models in one run directory ({models[0]}, "
                         f"{models[1]} ...): audit one model's run directory", field="model")
    suite = _labelled(rows)
    everything = suite is not None  # every tier and probe scored: ablations and the sweep
    all_sinks = [s for _, _, ss, _, _ in per for s in ss]
    t1 = time.perf_counter()
    pairs_embedded = embed(all_sinks, emb, policy, everything=everything)
    t2 = time.perf_counter()
    load_s = float(getattr(emb, "load_s", 0.0) or 0.0)  # once per process, not per unit
    clock["tier34"] = t2 - t1 - load_s
    replays = {}
    canary_hits = 0
    judge_calls_of: dict[str, int] = {}
    questions = []
    for row, evs, sinks, graph, orig in per:
        u0 = time.perf_counter()
        # a replayer only where a sink has a source lineage to probe: a real backend's
        # replayer loads the model (tens of seconds), for nothing on sinks without lineage
        rep = replayer_for(row) if replayer_for and any(s.pairs for s in sinks) else None
        if canary and rep is not None:  # Tier 1 live: the instrumented replay (canary.py)
            canary_hits += _canary(rep, sinks, orig, sorted(graph["sources"]))
        probe_sinks(sinks, rep, orig, th, everything=everything)
        if judge is not None and sinks:
            asked = judge_questions(sinks, evs or [], th, everything)
            questions += asked
            judge_calls_of[row["rollout_id"]] = len(asked)
        replays[row["rollout_id"]] = rep.replays if rep else 0
        unit_ms[row["rollout_id"]]["causal"] = 1000 * (time.perf_counter() - u0)
    if judge is not None:  # every question of the run in one batched call
        tj = time.perf_counter()
        judge_sinks(questions, judge)
        # the batch's time shared over the rollouts by their number of questions
        per_q = 1000 * (time.perf_counter() - tj) / max(1, len(questions))
        for rid, n in judge_calls_of.items():
            unit_ms[rid]["causal"] = unit_ms[rid].get("causal", 0.0) + per_q * n
    t3 = time.perf_counter()
    clock["causal"] = t3 - t2
    sink_rows = []
    without_oracle = 0
    for _, _, sinks, graph, _ in per:
        for s in sinks:
            v = verdict(s, th, policy.tiers)
            annotate(graph, s, v)
            sink_rows.append(sink_record(s, v))
            if v["audited"] and s.causal_source == "replay_sim_oracle":
                # the detector's own figure: the same sink without the oracle's verdicts
                v = verdict(s, th, policy.tiers - {"counterfactual"})
            without_oracle += bool(v["audited"])
    roll_rows = gap_rows(rows, sink_rows, replays)
    simulated = any(r["backend"] == "sim" for r in rows)
    writer.ensure_dir(out_dir, KIND)
    put_parquet(out_dir / "sinks.parquet", sink_rows, SINKS)
    put_parquet(out_dir / "rollouts.parquet", roll_rows, ROLLOUTS)
    put_parquet(out_dir / "dcpg.parquet",
                  [{"rollout_id": r["rollout_id"], "graph": json.dumps(g, sort_keys=True)}
                   for r, _, _, g, _ in per], DCPG)
    # whose numbers these are: the leading columns of every CSV (analysis/writers.py)
    origin: dict[str, object] = {k: ", ".join(sorted({str(r[k]) for r in rows}))
                                 for k in ("model", "backend")}
    name = ((config or {}).get("study") or {}).get("name")
    origin = {"study": name or run_dir.parent.name, **origin, "sim_agent": simulated}
    written = gap_table(roll_rows, sink_rows, out_dir / "tables", simulated, origin)
    units = max(len(rows), 1)
    judge_calls = judge.calls if judge is not None else 0
    judge_tokens = judge.tokens if judge is not None else 0
    cost = {"units": len(rows), "sinks": len(sink_rows),
            "pairs": sum(len(s.pairs) for s in all_sinks), "pairs_embedded": pairs_embedded,
            "replays": sum(replays.values()), "judge_calls": judge_calls,
            "judge_tokens": judge_tokens, "everything": everything, "model_load_s": load_s,
            **{f"{k}_ms_per_unit": 1000 * v / units for k, v in clock.items()}}
    written += overhead_table(cost, out_dir / "tables", simulated, origin)
    # the embedding pass is batched over every pair: its time is shared out by pairs
    npairs = sum(len(s.pairs) for s in all_sinks) or 1
    units_rows = [{"rollout_id": r["rollout_id"], "sinks": len(ss),
                   "ms": unit_ms[r["rollout_id"]]["graph"]
                   + unit_ms[r["rollout_id"]].get("causal", 0.0)
                   + 1000 * clock["tier34"] * sum(len(s.pairs) for s in ss) / npairs,
                   "judge_calls": judge_calls_of.get(r["rollout_id"], 0),
                   "replays": int(replays.get(r["rollout_id"], 0))}
                  for r, _, ss, _, _ in per]
    written += unit_cost_table(units_rows, out_dir / "tables", simulated, origin)
    if suite is not None:
        from containmentbench.audit.suite_report import score_study

        total_ms = sum(cost[f"{k}_ms_per_unit"] for k in clock)
        written += score_study(per, suite, policy, out_dir / "tables", rows, log, total_ms)
    summary = {"policy": policy.to_dict(), "policy_hash": policy.hash,
               "rollouts": len(rows), "sinks": len(sink_rows),
               "audited": sum(r["audited"] for r in sink_rows),
               # the detector's figure apart from the simulated agent's oracle replay
               "audited_without_oracle": without_oracle,
               "audited_oracle_only": sum(r["audited"] for r in sink_rows) - without_oracle,
               "causal_sources": dict(sorted(Counter(
                   r["causal_source"] for r in sink_rows).items())),
               "judge_errors": sum(r["error"] is not None for r in sink_rows),
               "replays": sum(replays.values()),
               "implicit_analysis": "+".join(
                   [m for m, on in (("replay", replayer_for is not None and any(
                       replayer_for.replayable(r["backend"]) for r in rows)),
                                    ("judge", judge is not None)) if on])
                   or "not run (no replayable backend, no judge)",
               "judge_calls": judge_calls, "judge_unparsed":
                   judge.unparsed if judge is not None else 0,
               "judge": judge.name if judge is not None else None,
               # who judged (backend, model, label, settings and their sha256): audits by
               # different judges are never mixed. Only with a judge, so the summary of an
               # audit without one keeps its bytes (reproduce compares them)
               **({"judge_identity": getattr(judge, "identity", None)}
                  if judge is not None else {}),
               "labelled_suite": suite is not None, "replay_real": replay_real,
               "adapter": adapter, "canary_replay": canary, "canary_hits": canary_hits,
               "embedding": {"package": MODEL_PACKAGE, "version": package_version(),
                             "model": "all-MiniLM-L6-v2"},
               # wall-clock files: frozen, but never compared by reproduce
               "wall_clock": [f"tables/audit_{t}.{x}" for t in ("overhead", "unit_cost")
                              for x in WALL_CLOCK_SUFFIXES]
               + ([f"tables/taintbench_paper.{x}" for x in WALL_CLOCK_SUFFIXES]
                  if suite is not None else []),
               "simulated_agent": simulated}
    encoded = getattr(emb, "encoded", None)  # depends on the cache: logged, never hashed
    writer.write_json(out_dir / "summary.json", summary, kind=KIND)
    oracle = summary["audited_oracle_only"]
    print(f"audit: {len(rows)} rollouts, {len(sink_rows)} sinks, {without_oracle} attributed"
          + (f" (+{oracle} by the simulated agent's oracle replay, an upper bound)"
             if oracle else "")
          + (f", {summary['judge_errors']} judge error rows" if summary["judge_errors"] else "")
          + f", {summary['replays']} replays; dcpg {clock['dcpg']:.1f} s, tiers 1-2 "
          f"{clock['tier12']:.1f} s, tiers 3-4 {clock['tier34']:.1f} s ({encoded} texts "
          f"encoded), causal {clock['causal']:.1f} s, total {time.perf_counter() - t0:.1f} s; "
          f"wrote {out_dir} ({len(written)} table files)", file=log)
    return summary
