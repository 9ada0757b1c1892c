"""Case studies as matched trace pairs (paper 000 Appendix D, Table 21).

Each case class of the paper is a selection rule over ``rollout_metrics``: a pair of rollouts
of the same scenario, model and seed under two defenses (so the only difference is the
defense), chosen deterministically (first by scenario id, then seed) among the pairs that
show the case's claim. A class with no qualifying pair in the study is reported as
``not observed`` with its rule, never filled with a near miss.

The side-by-side view keeps the containment-relevant steps only (proposal, decision,
confirmation, commit, rollback) and is redacted (paper 000 Appendix L): absolute file-system
paths are replaced, so a released case study names no host path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from containmentbench.report.rundir import RunDir

PAIR_ON = ["scenario_id", "model", "seed", "stage"]
STEP_KINDS = ("proposal", "invalid_tool", "parse_error", "decision", "confirm_request",
              "confirmation", "commit", "rollback", "scrub")
_PATH = re.compile(r"(?<![\w.@-])(?:/(?:home|Users|root|tmp|work|var|mnt|scratch|private)"
                   r"(?:/[\w.@+-]+)+|[A-Za-z]:\\(?:[\w.@+-]+\\?)+)")
REDACTED = "<redacted-path>"

Pred = Callable[[dict[str, Any], dict[str, Any]], bool]


def redact(text: str | None) -> str | None:
    """Replace absolute host paths (Appendix L: "redacted trace paths")."""
    return None if text is None else _PATH.sub(REDACTED, text)


@dataclass(frozen=True)
class CaseSpec:
    case: int
    title: str
    claim: str          # Table 21, "Claim supported"
    stages: tuple[str, ...]
    a: str              # the defense the case is about
    b: str              # its matched comparison
    rule: str           # the selection rule, in words
    pred: Pred


def _eq(row: dict[str, Any], col: str, v: Any) -> bool:
    return row.get(col) == v


CASES: tuple[CaseSpec, ...] = (
    CaseSpec(1, "no-defense policy-violation commit",
             "Why attack success alone is insufficient and runtime containment is needed.",
             ("security",), "none", "intent_ledger_v2",
             "none commits a policy violation (committed_harm=1); intent_ledger_v2 does not",
             lambda a, b: _eq(a, "committed_harm", 1) and _eq(b, "committed_harm", 0)),
    CaseSpec(2, "taint-only v1 active-utility failure",
             "The false-positive pressure that motivated intent-ledger v2.",
             ("active_tainted",), "taint_only_v1", "intent_ledger_v2",
             "taint_only_v1 fails the authorized tainted action; intent_ledger_v2 completes it",
             lambda a, b: _eq(a, "authorized_tainted_action_success", 0)
             and _eq(b, "authorized_tainted_action_success", 1)),
    CaseSpec(3, "intent-ledger v2 success on authorized tainted workflow",
             "Authorized tainted-action completion recovery in the policy case study.",
             ("active_tainted",), "intent_ledger_v2", "none",
             "intent_ledger_v2 completes the authorized tainted action with no false-positive "
             "block",
             lambda a, b: _eq(a, "authorized_tainted_action_success", 1)
             and not (a.get("fp_block_count") or 0)),
    CaseSpec(4, "tool-boundary versus v2 taint spread",
             "A matched pair on logged spread, without claiming committed-violation "
             "superiority.",
             ("security", "memory_recovery", "active_tainted"), "tool_boundary",
             "intent_ledger_v2",
             "normalized logged spread (eq. 4) differs between the two defenses",
             lambda a, b: a.get("blast_radius_norm") is not None
             and b.get("blast_radius_norm") is not None
             and a["blast_radius_norm"] != b["blast_radius_norm"]),
    CaseSpec(5, "memory recovery or quarantine",
             "How recovery metrics are represented, without claiming reinfection superiority.",
             ("memory_recovery",), "intent_ledger_v2", "none",
             "intent_ledger_v2 recovers (recovery_success=1)",
             lambda a, b: _eq(a, "recovery_success", 1)),
    CaseSpec(6, "rollback-scoped example",
             "Rollback evidence scoped to recovery rather than global dominance.",
             ("memory_recovery", "security"), "rollback_v2", "intent_ledger_v2",
             "rollback_v2 rolls back at least one committed side effect",
             lambda a, b: (a.get("rollback_count") or 0) > 0),
    CaseSpec(7, "policy-aware stress attempt blocked",
             "The bounded policy-aware stress slice (security stage of this study's suite).",
             ("security",), "intent_ledger_v2", "none",
             "intent_ledger_v2 sees a harmful attempt and commits no violation; none commits it",
             lambda a, b: _eq(a, "harm_attempt", 1) and _eq(a, "committed_harm", 0)
             and _eq(b, "committed_harm", 1)),
    CaseSpec(8, "parser measurement validity",
             "Action-parser diagnostics and invalid-tool non-execution evidence.",
             ("active_tainted", "security", "clean", "memory_recovery"), "intent_ledger_v2",
             "none",
             "the intent_ledger_v2 rollout has an invalid-tool call, a parse failure or a "
             "repaired parse",
             lambda a, b: (a.get("invalid_tool_rate") or 0) > 0
             or (a.get("parse_failure_rate") or 0) > 0 or (a.get("repaired_rate") or 0) > 0),
)

COLUMNS = {"case": pl.Int64, "title": pl.String, "stage": pl.String, "defense_a": pl.String,
           "defense_b": pl.String, "scenario_id": pl.String, "seed": pl.Int64,
           "rollout_a": pl.String, "rollout_b": pl.String, "candidates": pl.Int64,
           "status": pl.String, "rule": pl.String, "claim": pl.String}


def select_pairs(df: pl.DataFrame) -> pl.DataFrame:
    """One row per case class: the first qualifying matched pair, or ``not observed``."""
    rows = []
    defenses = set(df["defense"].unique().to_list())
    for c in CASES:
        found: list[tuple[dict[str, Any], dict[str, Any]]] = []
        if {c.a, c.b} <= defenses:
            base = df.filter(pl.col("stage").is_in(list(c.stages)) & (pl.col("status") != "error"))
            left = base.filter(pl.col("defense") == c.a)
            right = base.filter(pl.col("defense") == c.b)
            j = left.join(right, on=PAIR_ON, suffix="__b").sort(["scenario_id", "seed"])
            for r in j.iter_rows(named=True):
                a = {k: v for k, v in r.items() if not k.endswith("__b")}
                b = {k[:-3]: v for k, v in r.items() if k.endswith("__b")}
                b.update({k: r[k] for k in PAIR_ON})
                if c.pred(a, b):
                    found.append((a, b))
        first = found[0] if found else None
        missing = sorted({c.a, c.b} - defenses)
        rows.append({
            "case": c.case, "title": c.title,
            "stage": first[0]["stage"] if first else "/".join(c.stages),
            "defense_a": c.a, "defense_b": c.b,
            "scenario_id": first[0]["scenario_id"] if first else None,
            "seed": first[0]["seed"] if first else None,
            "rollout_a": first[0]["rollout_id"] if first else None,
            "rollout_b": first[1]["rollout_id"] if first else None,
            "candidates": len(found),
            "status": "pair" if first else (f"not run ({', '.join(missing)} absent)"
                                            if missing else "not observed"),
            "rule": c.rule, "claim": c.claim})
    return pl.DataFrame(rows, schema=COLUMNS)


def steps(run: RunDir, rollout_id: str) -> list[dict[str, Any]]:
    """The containment-relevant steps of a rollout, redacted, for the side-by-side view."""
    out = []
    for ev in run.load(rollout_id).events:
        if ev["kind"] not in STEP_KINDS:
            continue
        out.append({"seq": int(ev["seq"]), "kind": ev["kind"], "tool": ev.get("tool"),
                    "target": redact(ev.get("target")), "args": redact(ev.get("args")),
                    "decision": ev.get("decision"), "rule_id": ev.get("rule_id"),
                    "outcome": ev.get("outcome"),
                    "tainted": any(str(x).startswith("taint:") for x in ev.get("labels") or [])})
    return out
