"""Parquet IO for trace tables, validated on write and on read.

Writes are atomic: a shard is written into a temporary sibling folder with a ``SHA256SUMS``
sidecar and renamed into place, so a killed job never leaves a folder that looks finished,
and a finished shard is never overwritten by a failed run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from containmentbench.canonical import sha256_file
from containmentbench.errors import SchemaError
from containmentbench.trace.schema import SCHEMA_VERSION, TABLES

CHECKSUMS = "SHA256SUMS"
_WRITE_OPTS = {"compression": "zstd", "compression_level": 3, "use_dictionary": True,
               "write_statistics": True, "data_page_version": "2.0"}


def _with_meta(table: pa.Table, name: str) -> pa.Table:
    meta = {b"schema_version": SCHEMA_VERSION.encode(), b"table": name.encode()}
    return table.replace_schema_metadata(meta)


def to_table(name: str, columns: Mapping[str, list[Any]] | pa.Table) -> pa.Table:
    """Build a table of the named contract from column lists; fails naming the column."""
    schema = TABLES[name]
    if isinstance(columns, pa.Table):
        check_schema(columns.schema, name, "<in-memory table>")
        return columns.select(schema.names).cast(schema)
    missing = [f.name for f in schema if f.name not in columns]
    if missing:
        raise SchemaError(f"table '{name}' is missing column '{missing[0]}'", field=missing[0])
    extra = [c for c in columns if c not in schema.names]
    if extra:
        raise SchemaError(f"table '{name}' has unknown column '{extra[0]}'", field=extra[0])
    arrays = []
    for f in schema:
        try:
            arr = pa.array(columns[f.name], type=f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise SchemaError(f"column '{f.name}' of table '{name}': {exc}", field=f.name) from None
        if not f.nullable and arr.null_count:
            raise SchemaError(f"column '{f.name}' of table '{name}' has nulls", field=f.name)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)


def check_schema(schema: pa.Schema, name: str, path: str) -> None:
    want = TABLES[name]
    for f in want:
        idx = schema.get_field_index(f.name)
        if idx < 0:
            raise SchemaError(f"missing column '{f.name}' (table '{name}')", file=path,
                              field=f.name)
        if not schema.field(f.name).type.equals(f.type):
            raise SchemaError(f"column '{f.name}' has type {schema.field(f.name).type}, "
                              f"expected {f.type}", file=path, field=f.name)
    extra = [n for n in schema.names if n not in want.names]
    if extra:
        raise SchemaError(f"unexpected column '{extra[0]}' (table '{name}')", file=path,
                          field=extra[0])


def write_table(path: str | Path, name: str, table: pa.Table) -> None:
    check_schema(table.schema, name, str(path))
    pq.write_table(_with_meta(table, name), str(path), **_WRITE_OPTS)


def read_table(path: str | Path, name: str, columns: list[str] | None = None) -> pa.Table:
    """Read and validate one trace table; errors name the file and the column."""
    path = str(path)
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise SchemaError(f"cannot read Parquet ({exc})", file=path) from None
    schema = pf.schema_arrow
    meta = schema.metadata or {}
    version = meta.get(b"schema_version")
    if version is None:
        raise SchemaError("no schema_version in file metadata", file=path, field="schema_version")
    if version.decode() != SCHEMA_VERSION:
        raise SchemaError(f"schema_version {version.decode()} != {SCHEMA_VERSION}", file=path,
                          field="schema_version")
    table_name = meta.get(b"table", b"").decode()
    if table_name != name:
        raise SchemaError(f"file holds table '{table_name}', expected '{name}'", file=path)
    check_schema(schema, name, path)
    return pf.read(columns=columns)


def write_shard(out_dir: str | Path, tables: Mapping[str, pa.Table],
                *, extra: Mapping[str, bytes] | None = None) -> Path:
    """Write a shard's tables atomically with a checksum sidecar; returns the final folder.

    The files go to ``<out_dir>.tmp-<pid>`` first; the folder is renamed into place only when
    every file and ``SHA256SUMS`` are written. An existing finished shard is replaced only by
    a complete new one (never left half-written). ``extra`` files (name -> bytes, e.g. the
    shard's key record) are written and checksummed with the tables."""
    out = Path(out_dir)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    sums = []
    for name, table in tables.items():
        p = tmp / f"{name}.parquet"
        write_table(p, name, table)
        sums.append(f"{sha256_file(p)}  {name}.parquet")
    for fname, payload in (extra or {}).items():
        (tmp / fname).write_bytes(payload)
        sums.append(f"{sha256_file(tmp / fname)}  {fname}")
    (tmp / CHECKSUMS).write_text("\n".join(sorted(sums, key=lambda s: s.split()[1])) + "\n")
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old)
    else:
        os.replace(tmp, out)
    return out


def verify_shard(shard: str | Path) -> list[str]:
    """Names of files in a shard whose bytes no longer match ``SHA256SUMS`` (or are missing)."""
    shard = Path(shard)
    sums = shard / CHECKSUMS
    if not sums.exists():
        return [str(sums)]
    bad = []
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        p = shard / name
        if not p.exists() or sha256_file(p) != digest:
            bad.append(str(p))
    return bad


def shard_dirs(root: str | Path) -> list[Path]:
    """Every finished shard folder (one holding ``SHA256SUMS``) below ``root``, sorted."""
    return sorted(p.parent for p in Path(root).rglob(CHECKSUMS)
                  if not p.parent.name.startswith("."))


def read_shards(root: str | Path, name: str, columns: list[str] | None = None
                ) -> pa.Table:
    """Concatenate one table over every shard below ``root`` (validated per file)."""
    tables = [read_table(d / f"{name}.parquet", name, columns) for d in shard_dirs(root)
              if (d / f"{name}.parquet").exists()]
    if not tables:
        raise SchemaError(f"no '{name}' tables below {root}", file=str(root))
    return pa.concat_tables(tables)

