"""Coverage accounting against a declared tool inventory (paper 002 App. C.5, Table 3 last
row, §8 "Limitations").

"Actions on uninstrumented channels are unobservable, though their absence is detectable
relative to a declared tool inventory." A deployment declares the tools in its scope and
which of them the gateway mediates (routing ``mandatory`` or ``best-effort``, and the
expected bypass probability, Table 4: 0.01 for the micro-deployment). Every tool call then
falls in one of App. C.5's classes:

* **covered** — captured at the gateway and bound to a delegation;
* **unbound** — captured at the gateway without valid delegation context (§6 (d));
* **uncovered** — executed without the gateway: on a tool the inventory declares
  unmediated, or around the gateway on a mediated tool (bypass). Only evaluation-only
  ground truth (``capture``/``covered``, from the runtime's own record or the generator)
  counts these; CIM itself sees only their absence.

Per declared tool the status is ``covered`` (mediated and seen at the gateway), ``silent``
(mediated but no gateway telemetry at all: the absence the inventory makes detectable),
``unmediated`` (declared outside the gateway: unknown to CIM); tools seen in telemetry but
not declared are ``undeclared``. Inventory names are tool families (Table 8 ``tool.name``)
or tool-native operations of the sandbox and the generator catalog; an unknown name is bad
input, reported with its entry before anything is read or written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.cim.catalog import CATALOG
from containmentbench.cim.project import KIND_TOOL, TOOL_FAMILY
from containmentbench.cim.store import Store
from containmentbench.errors import BenchError

ROUTINGS = ("mandatory", "best-effort")
# tool families a store can hold: the sandbox's (project.py) and the generator catalog's
FAMILIES = frozenset(TOOL_FAMILY.values()) | {t.name for t in CATALOG}
OPERATIONS = frozenset(TOOL_FAMILY) | {op for t in CATALOG for op, _ in t.ops}
GATEWAY_FAMILIES = frozenset(KIND_TOOL.values())  # rows the gateway emits itself


@dataclass(frozen=True, slots=True)
class Inventory:
    routing: str
    bypass: float
    mediated: dict[str, bool]          # family or operation -> mediated by the gateway

    def is_mediated(self, family: str, operation: str | None) -> bool | None:
        """Operation entries override family entries; None when the tool is not declared."""
        if operation is not None and operation in self.mediated:
            return self.mediated[operation]
        return self.mediated.get(family)


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"cannot read the inventory ({type(exc).__name__})",
                         file=str(path)) from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise BenchError(f"not valid JSON ({type(exc).__name__})", file=str(path)) from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BenchError(f"not valid YAML ({type(exc).__name__})",
                         file=str(path)) from None


def load_inventory(path: str | Path) -> Inventory:
    """Read and check a tool inventory (YAML or JSON); one-line errors name the entry."""
    p = Path(path)
    data = _load(p)
    where = str(p)
    if not isinstance(data, dict):
        raise BenchError("expected a mapping with 'tools'", file=where)
    unknown = sorted(set(data) - {"routing", "bypass", "tools"})
    if unknown:
        raise BenchError(f"unknown key '{unknown[0]}'", file=where, field=unknown[0])
    routing = data.get("routing", "best-effort")
    if routing not in ROUTINGS:
        raise BenchError(f"'{routing}' is not one of {', '.join(ROUTINGS)}", file=where,
                         field="routing")
    bypass = data.get("bypass", 0.0)
    if isinstance(bypass, bool) or not isinstance(bypass, int | float) or not 0 <= bypass <= 1:
        raise BenchError("must be a probability in [0, 1]", file=where, field="bypass")
    tools = data.get("tools")
    if not isinstance(tools, list) or not tools:
        raise BenchError("expected a non-empty list of tools", file=where, field="tools")
    mediated: dict[str, bool] = {}
    for i, t in enumerate(tools):
        f = f"tools[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise BenchError("expected {name: <tool>, mediated: true|false}", file=where,
                             field=f)
        name = t["name"]
        if name not in FAMILIES and name not in OPERATIONS:
            raise BenchError(f"unknown tool '{name}' (a tool family such as "
                             f"{', '.join(sorted(FAMILIES)[:4])}, ... or a tool operation)",
                             file=where, field=f"{f}.name")
        if name in mediated:
            raise BenchError(f"tool '{name}' is declared twice", file=where, field=f"{f}.name")
        m = t.get("mediated", True)
        if not isinstance(m, bool):
            raise BenchError("must be true or false", file=where, field=f"{f}.mediated")
        extra = sorted(set(t) - {"name", "mediated"})
        if extra:
            raise BenchError(f"unknown key '{extra[0]}'", file=where, field=f"{f}.{extra[0]}")
        mediated[name] = m
    if routing == "mandatory" and bypass:
        raise BenchError("mandatory routing leaves no bypass: set bypass to 0", file=where,
                         field="bypass")
    return Inventory(routing, float(bypass), mediated)


def _calls(store: Store) -> pl.DataFrame:
    """One row per tool call (``proposal``), every capture class, with its family/op."""
    return (store.scan().filter(pl.col("event_kind") == "proposal")
            .select("tool_name", "tool_operation", "capture", "delegation_binding")
            .group_by("tool_name", "tool_operation", "capture", "delegation_binding")
            .agg(pl.len().alias("n")).collect())


def coverage(store: Store, inv: Inventory) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Per declared (or seen) tool: calls by class and status; totals and shares."""
    return coverage_from_calls(_calls(store), inv)


def coverage_from_calls(calls: pl.DataFrame, inv: Inventory
                        ) -> tuple[pl.DataFrame, dict[str, Any]]:
    """``coverage`` over call counts (tool_name, tool_operation, capture, binding, n)."""
    by: dict[str, dict[str, int]] = {}
    seen_gateway: set[str] = set()
    for r in calls.iter_rows(named=True):
        fam, op = r["tool_name"], r["tool_operation"]
        key = op if op in inv.mediated else fam
        c = by.setdefault(key, {"covered": 0, "unbound": 0, "uncovered": 0})
        if r["capture"] != "gateway":
            c["uncovered"] += r["n"]
        elif r["delegation_binding"] == "bound":
            c["covered"] += r["n"]
            seen_gateway.add(key)
        else:
            c["unbound"] += r["n"]
            seen_gateway.add(key)
    rows = []
    for name in sorted(set(inv.mediated) | set(by)):
        c = by.get(name, {"covered": 0, "unbound": 0, "uncovered": 0})
        declared = name in inv.mediated
        med = inv.mediated.get(name)
        if not declared:
            status = "gateway-internal" if name in GATEWAY_FAMILIES else "undeclared"
        elif not med:
            status = "unmediated"
        else:
            status = "covered" if name in seen_gateway else "silent"
        rows.append({"tool": name, "declared": declared, "mediated": med, **c,
                     "calls": sum(c.values()), "status": status})
    table = pl.DataFrame(rows, schema={"tool": pl.String, "declared": pl.Boolean,
                                       "mediated": pl.Boolean, "covered": pl.Int64,
                                       "unbound": pl.Int64, "uncovered": pl.Int64,
                                       "calls": pl.Int64, "status": pl.String})
    tot = {k: int(table[k].sum()) for k in ("covered", "unbound", "uncovered", "calls")}
    n = max(tot["calls"], 1)
    info = {"routing": inv.routing, "declared_bypass": inv.bypass, **{f"n_{k}": v for k, v
            in tot.items()}, "coverage": tot["covered"] / n, "unbound_share":
            tot["unbound"] / n, "uncovered_share": tot["uncovered"] / n,
            "silent_tools": table.filter(pl.col("status") == "silent")["tool"].to_list(),
            "undeclared_tools": table.filter(pl.col("status") == "undeclared")["tool"]
            .to_list()}
    return table, info
