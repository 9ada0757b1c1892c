"""The search's append-only query log (JSONL, each record flushed and fsync'd).

Paper 000 §6.3 bounds the search by *target queries* (candidate evaluation rollouts): at most
``max_queries_per_restart`` per restart. A query is logged ``query_start`` before its rollout
runs and ``query_done`` after; rewrites are logged as ``mutation``. The search is
deterministic given these records, so a killed search replays its own log: a finished query
is never rerun, a started one is rerun under the *same* key (its budget unit was already
counted), and nothing is counted twice. The budget is the number of distinct started keys of
a restart, which a test recounts from the file. The first record names the settings; a log of
other settings is refused rather than mixed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json, sha256_json
from containmentbench.errors import BenchError
from containmentbench.integrity import writer

KIND = "adaptive-querylog"

LOG = "queries.jsonl"


class QueryLog:
    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        self.path = Path(path)
        self.digest = sha256_json(settings)
        self.started: dict[str, dict[str, Any]] = {}
        self.done: dict[str, dict[str, Any]] = {}
        self.mutations: dict[str, dict[str, Any]] = {}
        if self.path.exists() and self.path.stat().st_size:
            self._read()
        else:
            self._append({"type": "header", "settings_sha256": self.digest,
                          "settings": settings})

    def _read(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        if lines and lines[-1]:  # a record cut by a crash mid-write: drop it (never counted)
            writer.truncate_log(self.path, len(raw) - len(lines[-1]), kind=KIND)
        for n, line in enumerate(lines[:-1], start=1):
            try:
                rec = json.loads(line)
            except ValueError:
                raise BenchError("not a JSON record", file=str(self.path), line=n) from None
            kind = rec.get("type")
            if n == 1:
                if kind != "header" or rec.get("settings_sha256") != self.digest:
                    raise BenchError("this query log was written under other search settings; "
                                     "use a new --out (a log is never mixed)",
                                     file=str(self.path), line=1)
            elif kind == "query_start":
                self.started[rec["key"]] = rec
            elif kind == "query_done":
                self.done[rec["key"]] = rec
            elif kind == "mutation":
                self.mutations[rec["key"]] = rec
            else:
                raise BenchError(f"unknown record type '{kind}'", file=str(self.path), line=n)

    def _append(self, rec: dict[str, Any]) -> None:
        writer.append_line(self.path, (canonical_json(rec) + "\n").encode("utf-8"), kind=KIND)

    def count(self, restart: int) -> int:
        """Target queries spent in a restart (distinct started keys)."""
        return sum(1 for r in self.started.values() if r["restart"] == restart)

    def start(self, key: str, restart: int, query: dict[str, Any]) -> bool:
        """Log a query before it runs; False when the key was already started (a resumed
        query: same work, no second budget unit). A different query under a logged key means
        the log and the settings disagree: refused."""
        rec = {"type": "query_start", "key": key, "restart": restart, **query}
        old = self.started.get(key)
        if old is not None:
            if old != rec:
                raise BenchError(f"logged query {key} differs from the one this search would "
                                 f"run (log from another version?)", file=str(self.path))
            return False
        self._append(rec)
        self.started[key] = rec
        return True

    def finish(self, key: str, result: dict[str, Any]) -> None:
        rec = {"type": "query_done", "key": key, **result}
        self._append(rec)
        self.done[key] = rec

    def mutation(self, key: str, rec: dict[str, Any]) -> None:
        full = {"type": "mutation", "key": key, **rec}
        self._append(full)
        self.mutations[key] = full


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x]
