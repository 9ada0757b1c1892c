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
