"""``analyze``: rollout metrics -> statistics, tables and figures (paper 000 §6.5, §7).

Comparisons, divergence scopes and sweeps come from the ``analysis`` config group; a
comparison naming a defense absent from the metrics is skipped and listed in
``analysis.json`` rather than silently dropped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis import (
    defense_tables,
    diagnostic_tables,
    figures,
    tables,
    validity,
)
from containmentbench.analysis import headline as H
from containmentbench.analysis.exposure import QUANTITIES, exposure_validity
from containmentbench.analysis.late import late_tables
from containmentbench.analysis.paired import Settings, stage_rows, zero_events
from containmentbench.analysis.parallel import pool_for
from containmentbench.analysis.parts import (
    read_frame,
    read_part,
    sensitivity_part,
    start_bootstrap,
)
from containmentbench.analysis.results import results_table
from containmentbench.analysis.seeds import interval_rows
from containmentbench.analysis.throughput import throughput_table
from containmentbench.analysis.topology import headline_sentences, utility_by_topology
from containmentbench.analysis.writers import Table, write
from containmentbench.errors import BenchError
from containmentbench.integrity import reading, writer

MEAN_METRICS = ("committed_harm", "unauthorized_action", "secret_leakage", "wrong_recipient",
                "harm_attempt", "taint_to_commit_rate", "blast_radius_norm", "blast_radius_raw",
                "blast_radius_fixed", "br_agent", "br_message", "br_memory", "br_tool",
                "br_side_effect", "privilege_jump", "cascade_depth", "memory_reinfection",
                "recovery_success", "rollback_count", "rolled_back_harm",
                "rolled_back_required", "confirmation_burden", "benign_success",
                "no_final_answer", "duplicate_side_effect", "fn_partial_follow",
                "authorized_tainted_action_success", "clean_benign_completion",
                "false_positive_block_rate", "false_positive_confirm_rate",
                "valid_tool_proposal_rate", "parse_failure_rate", "repaired_rate",
                "invalid_tool_rate", "exposed", "policy_block", "repeated_calls",
                "truncated_rate")


def _have(df: pl.DataFrame, *defenses: str) -> bool:
    present = set(df["defense"].unique().to_list())
    return all(d in present for d in defenses)


def analyze(metrics_path: str | Path, out: str | Path, cfg: Mapping[str, Any],
            reparse_summary: Mapping[str, Any] | None = None,
            sensitivity_path: str | Path | None = None,
            bootstrap_path: str | Path | None = None,
            workers: int | None = None,
            traces_dir: str | Path | None = None) -> dict[str, Any]:
    """Tables and figures. The sensitivity and bootstrap parts are read from the files the
    ``sensitivity`` and ``bootstrap`` rules cached (checked against these metrics and
    settings), or computed here when no file is given (``reproduce``, a manual run)."""
    t0 = time.perf_counter()
    out = Path(out)
    df = read_frame(metrics_path)
    reading.trusted(Path(metrics_path))  # a frozen study's metrics: the frozen bytes only
    if df.height == 0:
        raise BenchError("metrics table is empty", file=str(metrics_path))
    ctx = tables.Context(df)
    s = Settings.from_config(cfg)
    iv = interval_rows(df)  # one seed when the study declared its seeds copies
    n_figure_intervals = 4 * len(ctx.defenses) + 12 + (len(QUANTITIES) + len(H.QUANTITIES)
                                                       + 6) * len(ctx.defenses)
    with pool_for(df, len(cfg["comparisons"]) + n_figure_intervals, s.resamples,
                  workers) as pool:
        # the bootstrap's intervals go to the workers first; the deterministic tables are
        # computed here meanwhile (results do not depend on where or when they are drawn)
        boot_done = start_bootstrap(df, cfg, ctx.defenses, pool) \
            if bootstrap_path is None else None
        sens = read_part("sensitivity", sensitivity_path, metrics_path, cfg) \
            if sensitivity_path is not None else sensitivity_part(df, cfg)
        zero = zero_events(df, cfg["zero_event"]["metrics"], cfg["zero_event"]["stages"])
        plain = {"stage_means": tables.stage_means(df, MEAN_METRICS, ctx),
                 "table03": tables.table03(df, ctx), "table09": tables.table09(df, ctx),
                 "table11": tables.table11(df, ctx), "table15": tables.table15(df, ctx),
                 "table22": diagnostic_tables.table22(df, ctx),
                 "table26": tables.table26(df, cfg["seed_variance"]["metrics"], ctx)}
        sc, se = cfg["stage_contribution"], cfg["sensitivity"]
        pair = (sc["a"], sc["b"]) if _have(df, sc["a"], sc["b"]) else (ctx.defenses[0],
                                                                        ctx.defenses[-1])
        exposure = exposure_validity(iv, ctx, s, pool)
        found = H.findings(iv, ctx, s, pool)
        by_topology = utility_by_topology(iv, ctx, s, pool)
        fig_tables, fig_paths = figures.all_figures(iv, ctx, s, pair, out / "figures", pool)
        boot = read_part("bootstrap", bootstrap_path, metrics_path, cfg) \
            if boot_done is None else boot_done()
    skipped: list[str] = list(boot["skipped"])
    n_intervals = boot["intervals"]
    configured = [c for _, c in boot["configured"] if c is not None]
    claims = [c for claim, c in boot["configured"] if c is not None and claim]
    rows25 = configured + boot["sweep"]
    div = boot["divergence"]
    out_tables: list[Table] = [found, exposure, by_topology, plain["stage_means"],
                               plain["table03"], plain["table09"], tables.table10(div, ctx, df), plain["table11"],
                               tables.table12(claims, zero, ctx,
                                              sorted({c.b for c in claims} | {c.a for c in claims}),
                                              df),
                               plain["table15"], plain["table22"],
                               tables.table25(rows25, ctx, df), plain["table26"],
                               Table("zero_event_bounds", ctx.caption(
                                   "Zero-event one-sided upper bounds at rollout and scenario-"
                                   "cluster level: exact binomial 95% and the rule of three "
                                   "(§7.2); n counts outcome rollouts, provider errors, context "
                                   "overflows and N/A rollouts are excluded and counted."),
                                   zero)]
    if sens["stage_contribution"] is not None:
        out_tables.append(tables.table13(sens["stage_contribution"], sc["a"], sc["b"], ctx))
    if sens["sensitivity"] is not None:
        out_tables.append(tables.table14(sens["sensitivity"], se["a"], se["b"], ctx))
    if sens["attribution"] is not None:
        out_tables.append(Table("rule_attribution", ctx.caption(
            "Rule-level attribution: on pairs whose utility differs, the rule ids that stopped "
            "a call in each defense's row (§7.2)."), sens["attribution"]))
    if "stress" in set(df["suite"].unique().to_list()):
        out_tables.append(diagnostic_tables.table17(df, ctx))
    funnel = diagnostic_tables.target_funnel(df, ctx)  # studies with attacked rollouts (§6.3, §7.4)
    if funnel is not None:
        out_tables.append(funnel)
    t24 = diagnostic_tables.table24(reparse_summary, ctx)
    if t24 is not None:
        out_tables.append(t24)
    # the defense's cost, and which layer of a stack contained each attack (defense API)
    cost = defense_tables.defense_cost(df, ctx, s)
    out_tables += cost
    stacks = defense_tables.stack_attribution(df, ctx, s)
    if stacks is not None:
        out_tables.append(stacks)
    # hook time (wall clock, from the traces' timings): written, never a result
    traces = Path(traces_dir) if traces_dir is not None else \
        Path(metrics_path).resolve().parent.parent / "traces"
    overhead = defense_tables.defense_overhead(traces, ctx)
    # rollouts per hour, calls and tokens per second of the jobs that wrote these traces, from
    # their records beside the traces (wall clock: analysis/throughput.py)
    speed = throughput_table(out, traces, ctx)
    written = []
    writer.ensure_dir(out, "analysis")  # after every input was read and checked
    for t in out_tables:
        written += write(t, out / "tables", origin=ctx.origin)
    wall_clock = [p for t in (overhead, speed) if t is not None
                  for p in write(t, out / "tables", origin=ctx.origin)]
    for t in fig_tables:
        written += write(t, out / "figures", origin=ctx.origin)
    # the headline (analysis/headline.py): its figure, then headline.{json,md} in tables/
    # the quantities the study did not measure (analysis/validity.py): said, never ranked
    gates = validity.gates(stage_rows(iv, "all"), cfg)
    fig_paths += [p for p in H.write(found, ctx, claims, out, gates,
                                     [*headline_sentences(by_topology.frame, ctx.defenses),
                                      *defense_tables.cost_sentences(cost)])
                  if p.suffix in (".png", ".pdf")]
    # every number of every table above, and of the tables the steps before this one wrote
    # (case studies, Table 28, Table 20, the provenance audit: analysis/late.py), one row
    # each (analysis/results.py)
    written += write(results_table([*out_tables, *fig_tables, *late_tables(out)], ctx),
                     out / "tables",
                     formats=("parquet", "csv"), origin=ctx.origin)
    # relative to the output folder: analysis.json is hashed by freeze, and an absolute path
    # would tie it to one machine and one results_dir
    rel_metrics = os.path.relpath(os.path.abspath(metrics_path), os.path.abspath(out))
    info = {"metrics": Path(rel_metrics).as_posix(), "rollouts": df.height, "intervals": n_intervals,
            "resamples": boot["resamples"],
            "tables": sorted([t.name for t in out_tables] + ["headline", "results"]),
            "figures": sorted(p.name for p in fig_paths), "skipped": skipped,
            "simulated_agent": ctx.sim, "config": dict(cfg),
            # measurements of the machine, not results: reproduce does not compare them
            "wall_clock": sorted(Path(p).relative_to(out).as_posix() for p in wall_clock),
            "decoding": ctx.decoding, "tool_modes": ctx.tool_modes,
            "tools_offered": ctx.tools_offered, "exposure": ctx.exposure,
            "reparse_summary": dict(reparse_summary) if reparse_summary else None}
    writer.write_json(out / "analysis.json", info, kind="analysis")
    info["seconds"] = time.perf_counter() - t0
    return info
