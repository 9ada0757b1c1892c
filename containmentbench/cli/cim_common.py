"""Helpers shared by the ``containmentbench cim`` verb modules (cim_cmd, cim_deploy_cmd)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

# `cim generate` flag help, one per generator parameter (catalog.GenParams)
GEN_HELP = {
    "workflows": "comma-separated workflows W1,W2,W3 (§7.2.1)",
    "days": "days of telemetry", "users": "users U (Table 4: 10,000)",
    "agents": "agents A (Table 4: 100,000)", "tools_min": "fewest tools K per delegation (3)",
    "tools_max": "most tools K per delegation (7)", "files": "file universe (1e6)",
    "repos": "repository universe (1e3)", "channels": "channel universe (1e2)",
    "tickets": "ticket universe", "records": "CRM record universe",
    "delegations_per_day": "delegations per day and workflow, children included "
                           "(Table 4: 2e5-2e6)",
    "events_min": "fewest tool calls per delegation (20)",
    "events_max": "most tool calls per delegation (500)",
    "loops_w1": "mean calls per W1 delegation (50)", "loops_w2": "mean calls per W2 (60)",
    "loops_w3": "mean calls per W3 (75)",
    "overlap_rate": "share of users running concurrent delegations (10-40%%)",
    "spawn_fanout": "mean children per W2 delegation (2-5)",
    "spawn_depth": "deepest W2 re-delegation (1-4)",
    "retry_rate": "mean retries per W3 step (0-10)", "backtrack_rate": "W3 restarts per step",
    "coverage": "share of calls on gateway-mediated tools (0.8)",
    "bypass": "share of calls going around the gateway (0.05)",
    "trace_coverage_min": "least per-tool share of events with trace ids (0.6)",
    "trace_coverage_max": "most per-tool share of events with trace ids (0.8)",
    "trace_propagation": "W2 children continuing the parent's trace",
    "unbound_rate": "gateway calls without valid delegation context",
    "hint_conflict_rate": "calls whose agent hints conflict with the binding",
    "external_share_rate": "shares addressed outside the organization",
    "drift_rate": "delegations with an injected late high-impact expansion (§5.4)",
    "approval_rate": "injected drifts followed by an approval event",
    "seed": "generator seed", "chunk_events": "events per bucket file (bounds memory)",
    "row_group_rows": "Parquet row-group size"}


def store_of(args: argparse.Namespace) -> Any:
    from containmentbench.cim.store import Store

    return Store(args.store)


def plain(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def emit(args: argparse.Namespace, title: str, table: Any, info: dict[str, Any]) -> None:
    import polars as pl

    facts = {k: plain(v) for k, v in info.items() if not isinstance(v, pl.DataFrame)}
    if getattr(args, "json", False):
        rows = [{k: plain(v) for k, v in r.items()} for r in table.iter_rows(named=True)]
        print(json.dumps({"query": title, "info": facts, "rows": rows}, indent=2, default=str))
        return
    print(f"{title}: " + ", ".join(f"{k}={v}" for k, v in facts.items()
                                   if not isinstance(v, list) or len(v) <= 8))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=48, tbl_width_chars=240,
                   fmt_table_cell_list_len=6):
        print(table)


def own_file(out: Path, suffixes: tuple[str, ...], kind: str) -> None:
    """A --out file: new, or an earlier one of this kind (never a folder or another file)."""
    from containmentbench.integrity import writer

    if out.suffix not in suffixes:
        raise BenchError(f"expected a {' or '.join(suffixes)} file name", file=str(out),
                         field="out")
    writer.check_file(out, kind)
