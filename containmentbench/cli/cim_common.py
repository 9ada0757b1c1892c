"""Helpers shared by the ``containmentbench cim`` verb modules (cim_cmd, cim_deploy_cmd)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError


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
