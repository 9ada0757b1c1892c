"""Parquet IO for trace tables, validated on write and on read.

Writes are atomic: a shard is written into a temporary sibling folder with a ``SHA256SUMS``
sidecar and renamed into place, so a killed job never leaves a folder that looks finished,
and a finished shard is never overwritten by a failed run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from containmentbench.canonical import sha256_file
from containmentbench.errors import SchemaError
from containmentbench.integrity import writer
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


def table_bytes(name: str, table: pa.Table, where: str = "<in-memory table>") -> bytes:
    """A trace table as the Parquet bytes of its contract (schema checked, metadata set)."""
    check_schema(table.schema, name, where)
    return writer.parquet_bytes(_with_meta(table, name), **_WRITE_OPTS)


def by_rollout(table: pa.Table) -> dict[str, list[dict[str, Any]]]:
    """The rows of a trace table as dicts, grouped by ``rollout_id`` in file order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        out.setdefault(row["rollout_id"], []).append(row)
    return out


def read_table(path: str | Path, name: str, columns: list[str] | None = None,
               filters: Any = None) -> pa.Table:
    """Read and validate one trace table; errors name the file and the column. ``filters``
    (pyarrow's row filter) reads only the matching rows, after the same validation."""
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
    if filters is not None:
        return pq.read_table(path, columns=columns, filters=filters)
    return pf.read(columns=columns)


def _same_shard(new: Path, old: Path) -> bool:
    """Two shards hold the same traces (wall-clock ``timings.parquet`` aside)."""
    def sums(d: Path) -> list[str] | None:
        try:
            lines = (d / CHECKSUMS).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            return None
        return sorted(ln for ln in lines if not ln.endswith(" timings.parquet"))
    a, b = sums(new), sums(old)
    return a is not None and a == b and not verify_shard(old)


def write_shard(out_dir: str | Path, tables: Mapping[str, pa.Table], *,
                extra: Mapping[str, bytes] | None = None, force: bool = False) -> Path:
    """Write a shard's tables atomically with a checksum sidecar; returns the final folder.

    The files are built in a temporary sibling folder, which is put in place only when every
    file and ``SHA256SUMS`` are written (integrity.writer.building_dir: an identical existing
    shard is kept, a different one is replaced only with ``force`` and then moved aside,
    never deleted; a folder that is not a shard is refused). Leftovers of a killed earlier
    run are cleaned first. ``extra`` files (name -> bytes, e.g. the shard's key record) are
    written and checksummed with the tables."""
    import hashlib

    out = Path(out_dir)
    writer.check_out(out, "shard", force)
    writer.clean_leftovers(out, complete=lambda d: (d / CHECKSUMS).exists()
                           and not verify_shard(d))
    with writer.building_dir(out, "shard", force, identical=_same_shard) as b:
        sums = []
        files = {f"{name}.parquet": table_bytes(name, table, str(out / f"{name}.parquet"))
                 for name, table in tables.items()}
        files.update(extra or {})
        for fname, payload in files.items():
            b.put(fname, payload)
            sums.append(f"{hashlib.sha256(payload).hexdigest()}  {fname}")
        b.put_text(CHECKSUMS, "\n".join(sorted(sums, key=lambda s: s.split()[1])) + "\n")
    return out


def read_checksums(shard: str | Path) -> list[tuple[str, str]]:
    """``(digest, name)`` pairs of a shard's ``SHA256SUMS``; a malformed or empty file is a
    one-line error (a shard with no sums is never "done")."""
    sums = Path(shard) / CHECKSUMS
    try:
        text = sums.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SchemaError("not UTF-8 text", file=str(sums)) from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64 or "/" in parts[1] or parts[1] in (".", ".."):
            raise SchemaError("expected '<sha256>  <file name>'", file=str(sums), line=i)
        out.append((parts[0], parts[1]))
    if not out:
        raise SchemaError("empty checksum list", file=str(sums))
    return out


def verify_shard(shard: str | Path) -> list[str]:
    """Names of files in a shard whose bytes no longer match ``SHA256SUMS`` (or are missing).
    A missing, empty or malformed ``SHA256SUMS`` marks the shard itself as bad, as does a
    ``rollouts.parquet`` the sums do not list."""
    shard = Path(shard)
    sums = shard / CHECKSUMS
    if not sums.exists():
        return [str(sums)]
    try:
        pairs = read_checksums(shard)
    except SchemaError:
        return [str(sums)]
    bad = []
    for digest, name in pairs:
        p = shard / name
        if not p.is_file() or sha256_file(p) != digest:
            bad.append(str(p))
    if "rollouts.parquet" not in {n for _, n in pairs} and (shard / "rollouts.parquet").exists():
        bad.append(str(shard / "rollouts.parquet"))
    return bad


def shard_dirs(root: str | Path, verify: bool = True) -> list[Path]:
    """Every finished shard folder (one holding ``SHA256SUMS``) below ``root``, sorted.
    With ``verify`` (the default for every reader) a shard whose files do not match its
    ``SHA256SUMS``, or whose ``SHA256SUMS`` is empty or malformed, is a one-line error: a
    measurement is never computed from a damaged shard."""
    out = sorted(p.parent for p in Path(root).rglob(CHECKSUMS)
                 if not any(part.startswith(".") for part in
                            p.parent.relative_to(root).parts))
    if verify:
        for d in out:
            bad = verify_shard(d)
            if bad:
                raise SchemaError(f"shard does not match its {CHECKSUMS} (damaged or "
                                  f"unfinished; `snakemake` quarantines and redoes it)",
                                  file=bad[0])
    return out


def read_shards(root: str | Path, name: str, columns: list[str] | None = None
                ) -> pa.Table:
    """Concatenate one table over every shard below ``root`` (validated per file)."""
    tables = [read_table(d / f"{name}.parquet", name, columns) for d in shard_dirs(root)
              if (d / f"{name}.parquet").exists()]
    if not tables:
        raise SchemaError(f"no '{name}' tables below {root}", file=str(root))
    return pa.concat_tables(tables)

