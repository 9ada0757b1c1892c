"""Checks every verb runs on its inputs before any work (one-line errors, exit 2)."""

from __future__ import annotations

from pathlib import Path

from containmentbench.errors import BenchError


def need_dir(path: Path, field: str, shards: bool = True) -> None:
    """An input folder that exists (and, for trace folders, holds finished shards)."""
    from containmentbench.trace.io import shard_dirs

    if not path.exists():
        raise BenchError("no such folder", file=str(path), field=field)
    if not path.is_dir():
        raise BenchError("not a folder", file=str(path), field=field)
    if shards and not shard_dirs(path):
        raise BenchError("no finished trace shards (folders with SHA256SUMS) below this path",
                         file=str(path), field=field)


def need_file(path: Path, field: str) -> None:
    if not path.exists():
        raise BenchError("no such file", file=str(path), field=field)
    if not path.is_file():
        raise BenchError("not a regular file", file=str(path), field=field)


def is_parquet_table(path: Path, table: str) -> bool:
    """Whether ``path`` is a Parquet file this package wrote for ``table``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException):
        return False
    return meta.get(b"table") == table.encode()


def check_run_inputs(run: Path, analysis: bool = False) -> None:
    """The files of a run directory that ``freeze`` and ``reproduce`` read before they hash
    or rebuild anything: ``config.yaml`` (valid YAML of the config's shape), the metrics table
    (every column of the right kind) and, for ``reproduce``, ``analysis.json`` with a valid
    ``config`` section (what ``analyze`` is re-run with). One line naming file and field."""
    from containmentbench.config.compose import read_resolved
    from containmentbench.config.keys import check_analysis
    from containmentbench.integrity.inputs import load_json
    from containmentbench.metrics.schema import check_metrics_file

    if not run.is_dir():
        raise BenchError("no such run directory", file=str(run))
    if (run / "config.yaml").exists():
        read_resolved(run / "config.yaml")
    metrics = run / "metrics" / "rollout_metrics.parquet"
    if metrics.exists():
        check_metrics_file(metrics)
    info = run / "analysis.json"
    if analysis and info.exists():
        check_analysis(load_json(info, "analysis")["config"], "config", str(info))
