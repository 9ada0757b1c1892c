"""Run the micro-deployment (micro.py) and write its CIM store.

``run_micro`` drives each run's episodes in lockstep against one backend (``sim`` here; any
backend ``make_backend`` builds, e.g. a real CPU model), every episode's gateway timed and
its recorder tapped into the run's live emitter. The store holds one events file per run
(``events/workflow=<W>/day=000/bucket=<run>/part-0.parquet``, rows in capture order), the
delegation side table, and a manifest with the parameters, the inventory, the emitter's
counters, App. C.5 coverage and the latency summary that ``cim report --latency`` prints as
Table 6's gateway rows.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from containmentbench.cim.coverage import Inventory, coverage_from_calls
from containmentbench.cim.live import tap
from containmentbench.cim.micro import (
    POOL,
    Meter,
    MicroParams,
    TaggingEmitter,
    capture_model,
    kept_samples,
    run_scenarios,
    timed_gateway,
)
from containmentbench.cim.overhead import latency_summary
from containmentbench.cim.schema import validate
from containmentbench.cim.store import (
    DelegationWriter,
    partition_path,
    side_table,
    write_events,
    write_manifest,
)
from containmentbench.errors import BenchError
from containmentbench.integrity import writer


@dataclasses.dataclass(slots=True)
class MicroRun:
    tables: list[tuple[str, int, pa.Table]]
    samples_ns: list[int]
    all_samples: int
    stats: dict[str, int]
    status: dict[str, int]
    n_rollouts: int
    wall_s: float


def run_micro(p: MicroParams, inv: Inventory, backend: Any, model_label: str,
              progress: bool = False, max_steps: int = 400) -> MicroRun:
    from containmentbench.defense.loading import load_defense
    from containmentbench.runtime.driver import ShardContext, drive_lockstep, new_episode
    from containmentbench.runtime.episode import RuntimeConfig
    from containmentbench.scenarios.manifest import load_suite

    p.check()
    scen = load_suite(p.suite, p.stage)
    policy = load_defense("none")
    ctx = ShardContext("cim-micro", model_label, backend.name, "none", p.seed, None)
    # W3's retries need the turns; a real model may be capped lower (--max-steps)
    cfg = RuntimeConfig(max_steps=max_steps, max_agent_turns=max(max_steps // 2, 1))
    meter = Meter()
    gateway_cls = timed_gateway(meter)
    out: list[tuple[str, int, pa.Table]] = []
    stats = {"n_rows": 0, "n_batches": 0, "n_retries": 0, "n_dropped": 0}
    status: dict[str, int] = {}
    n_roll = 0
    t0 = time.perf_counter()
    for wf in p.workflows:
        pool = [s for s in scen if s.topology in POOL[wf]]
        if not pool:
            raise BenchError(f"suite '{p.suite}' stage '{p.stage}' has no "
                             f"{'/'.join(POOL[wf])} scenario for {wf}", field="suite")
        for run in range(p.runs):
            batches: list[pa.Table] = []
            em = TaggingEmitter(meter, batches.append, batch_rows=512, policy="block")

            def start(s: Any, em: TaggingEmitter = em) -> Any:
                ep = new_episode(s, policy, ctx, cfg)
                ep.gateway.__class__ = gateway_cls
                tap(ep, em, meter.add)
                return ep

            def done(i: int, ep: Any, w: float, m: float) -> None:
                status[ep.status] = status.get(ep.status, 0) + 1

            specs = run_scenarios(pool, wf, run, p)
            drive_lockstep([lambda s=s: start(s) for s in specs], backend, len(specs), None,
                           done)
            em.close()
            meter.close()
            for k in stats:
                stats[k] += em.stats[k]
            n_roll += len(specs)
            table = pa.concat_tables(batches) if batches else None
            if table is not None:
                out.append((wf, run, capture_model(table, inv, p.seed)))
            if progress:
                print(f"[cim micro] {wf} run {run + 1}/{p.runs}: {len(specs)} delegations, "
                      f"{table.num_rows if table is not None else 0} rows, "
                      f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    kept = kept_samples(meter.samples, inv, p.seed)
    return MicroRun(out, kept, len(meter.samples), stats, status, n_roll,
                    time.perf_counter() - t0)


def write_micro_store(out_dir: Path, res: MicroRun, p: MicroParams, inv: Inventory,
                      backend: str, model: str, force: bool = False) -> dict[str, Any]:
    """One events file per run, the side table and the manifest (module docstring)."""
    final = Path(out_dir)
    root = writer.begin_dir(final, "cim-store", force)
    try:
        manifest = _fill(root, res, p, inv, backend, model)
    except BaseException:
        writer.discard_dir(root)
        raise
    writer.commit_dir(root, final, "cim-store", force=force)
    return manifest


def _fill(root: Path, res: MicroRun, p: MicroParams, inv: Inventory, backend: str,
          model: str) -> dict[str, Any]:
    frames, size, n = [], 0, 0
    for wf, run, table in res.tables:
        validate(table, f"{wf} run {run}")
        rel = partition_path(wf, 0, run)
        size += write_events(root, rel, table)
        n += table.num_rows
        f = pl.from_arrow(table.select(["event_id", "time", "delegation_id",
                                        "delegation_parent_id", "principal_user_id",
                                        "agent_id", "agent_instance_id", "event_kind",
                                        "delegation_binding", "tool_name", "tool_operation",
                                        "capture"]))
        assert isinstance(f, pl.DataFrame)
        frames.append(f.with_columns(pl.lit(wf).alias("workflow"), pl.lit(rel).alias("file")))
    if not frames:
        raise BenchError("the micro-deployment produced no CIM rows", field="runs")
    allrows = pl.concat(frames)
    dw = DelegationWriter(root)
    dw.write(side_table(allrows))
    dw.close()
    calls = (allrows.filter(pl.col("event_kind") == "proposal")
             .group_by("tool_name", "tool_operation", "capture", "delegation_binding")
             .agg(pl.len().alias("n")))
    _, cov = coverage_from_calls(calls, inv)
    lat = latency_summary(res.samples_ns)
    lat["n_calls_all"] = res.all_samples
    manifest = {"producer": "cim micro", "params": dataclasses.asdict(p),
                "backend": backend, "model": model, "n_events": n, "parquet_bytes": size,
                "n_rollouts": res.n_rollouts, "status": res.status, "emitter": res.stats,
                "inventory": {"routing": inv.routing, "bypass": inv.bypass,
                              "mediated": inv.mediated},
                "coverage": cov, "latency": lat, "wall_s": round(res.wall_s, 2)}
    write_manifest(root, manifest)
    return manifest
