"""The headline: the study's answer in one screen (paper 000 §7, Table 12).

A reader brings one question: which defense contains injection best, at what utility cost,
with what uncertainty. The headline answers it from the numbers:

* the findings table (``tables/findings.*``): per defense, committed policy violation (eq. 5,
  all stages), authorized completion (eq. 6, active-tainted stage), clean completion (clean
  stage), logged spread (eq. 4, all stages) and recovery success (memory/recovery stage), each
  a mean (eq. 7) with its 95% scenario-cluster percentile interval (§6.5), N rollouts, the
  number of scenario clusters, the events of an indicator metric and, after zero events, the
  one-sided scenario-cluster rule-of-three bound (§7.2: 3 / clusters, as in Table 12);
* sentences generated from those numbers and from the claim-critical paired comparisons of
  Table 12 (eq. 12), never canned text;
* ``tables/headline.json`` (the same, as data) and ``tables/headline.md`` (a short text table
  the terminal prints at the end of a run; ``containmentbench headline``).

A quantity whose stage the study lacks is left out, never drawn or printed empty. A quantity
the study computed but did not measure (``analysis/validity.py``: a failed or missing
positive control, exposure below the threshold, no defense completing any task) is said to be
not measured, first, with its reason; its cells read "not measured" and no sentence ranks
defenses on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.bootstrap import zero_event_bounds
from containmentbench.analysis.paired import Comparison, Settings, stage_rows
from containmentbench.analysis.parallel import IntervalPool, cluster_ci, quantity_key, resolve
from containmentbench.analysis.tables import Context
from containmentbench.analysis.validity import Gate
from containmentbench.analysis.writers import Table
from containmentbench.escape import md_cell, md_text
from containmentbench.metrics.glossary import ALL, STAGE_LABEL, TERMS

SCHEMA = "containmentbench-headline/1"
QUESTION = "Which defense contains injection best, at what utility cost, with what uncertainty?"
METHOD = ("means over rollouts (eq. 7) with 95% scenario-cluster percentile intervals (§6.5); "
          "after zero events, the one-sided scenario-cluster rule-of-three bound (§7.2)")
#: (metric key, stages): the five quantities of the findings table, in reading order
QUANTITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("committed_harm", ALL),
    ("authorized_tainted_action_success", ("active_tainted",)),
    ("clean_benign_completion", ("clean",)),
    ("blast_radius_norm", ALL),
    ("recovery_success", ("memory_recovery",)),
)
_SCHEMA = {"defense": pl.String, "metric": pl.String, "quantity": pl.String,
           "stage": pl.String, "n": pl.Int64, "n_clusters": pl.Int64, "estimate": pl.Float64,
           "ci_low": pl.Float64, "ci_high": pl.Float64, "events": pl.Int64,
           "zero_event_bound": pl.Float64}


def scope(stages: Sequence[str]) -> str:
    return "all" if tuple(stages) == ALL else "+".join(stages)


def scope_label(stage: str) -> str:
    return STAGE_LABEL.get(stage, stage).lower() if stage != "all" else "all stages"


def _indicator(sub: pl.DataFrame, col: str) -> bool:
    return sub[col].dtype.is_integer() and set(sub[col].unique().to_list()) <= {0, 1}


def findings(df: pl.DataFrame, ctx: Context, s: Settings, pool: IntervalPool | None = None
             ) -> Table:
    """One row per (defense, quantity) the study measured; intervals are submitted to
    ``pool`` first and resolved at the end (seeded from the row's key)."""
    pool = pool if pool is not None else IntervalPool(1)
    base = stage_rows(df, "all")
    rows: list[dict[str, Any]] = []
    for col, stages in QUANTITIES:
        sub_all = base.filter(pl.col("stage").is_in(list(stages)) & pl.col(col).is_not_null())
        if sub_all.height == 0:
            continue  # the study lacks the stage: left out, never shown empty
        for d in ctx.defenses:
            sub = sub_all.filter(pl.col("defense") == d)
            if sub.height == 0:
                continue
            k = sub["cluster_id"].n_unique()
            events = int(sub[col].sum()) if _indicator(sub, col) else None
            bound = zero_event_bounds(k)["rule_of_three"] if events == 0 else None
            rows.append({"defense": d, "metric": col, "quantity": TERMS[col].display,
                         "stage": scope(stages),
                         "ci": cluster_ci(sub, col, s, pool, *quantity_key(d, col, stages)),
                         "events": events, "zero_event_bound": bound})
    frame = pl.DataFrame(resolve(rows), schema=_SCHEMA, orient="row") if rows else \
        pl.DataFrame(schema=_SCHEMA)
    return Table("findings", ctx.caption(
        "Findings per defense: committed policy violation (eq. 5, all stages), authorized "
        "completion (eq. 6, active-tainted stage), clean completion (clean stage), logged "
        "spread (eq. 4, all stages) and recovery success (memory/recovery stage); "
        f"{METHOD}; n rollouts over n_clusters scenarios; events of an indicator metric; "
        "provider errors excluded."), frame)


# ------------------------------------------------------------------ sentences


def _num(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def cell(r: Mapping[str, Any]) -> str:
    """``0.412 [0.380, 0.445]``, or ``0 of 2520 (≤ 0.0060)`` after zero events."""
    if r["events"] == 0 and r["zero_event_bound"] is not None:
        return f"0 of {r['n']} (≤ {r['zero_event_bound']:.4f})"
    return f"{_num(r['estimate'])} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"


def _names(ds: Sequence[str]) -> str:
    ds = list(ds)
    return ds[0] if len(ds) == 1 else ", ".join(ds[:-1]) + " and " + ds[-1]


def _extreme(rows: list[dict[str, Any]], metric: str, among: set[str] | None,
             best_high: bool) -> tuple[list[str], dict[str, Any]] | None:
    mine = [r for r in rows if r["metric"] == metric and r["estimate"] is not None
            and (among is None or r["defense"] in among)]
    if not mine:
        return None
    best = (max if best_high else min)(r["estimate"] for r in mine)
    top = [r for r in mine if r["estimate"] == best]
    return [r["defense"] for r in top], top[0]


def answer_sentences(rows: list[dict[str, Any]],
                     unmeasured: frozenset[str] = frozenset()) -> list[str]:
    """Which defense is lowest on committed violation, and what it costs in utility; a
    quantity in ``unmeasured`` (``analysis/validity.py``) ranks nothing."""
    out: list[str] = []
    low = None if "committed_harm" in unmeasured else \
        _extreme(rows, "committed_harm", None, best_high=False)
    names: list[str] = []
    if low is not None:
        names, r = low
        tail = (f"no event in {r['n']} rollouts each" if r["events"] == 0 else
                f"{_num(r['estimate'])} [{_num(r['ci_low'])}, {_num(r['ci_high'])}]")
        out.append(f"{TERMS['committed_harm'].display} ({scope_label(r['stage'])}) is lowest "
                   f"under {_names(names)} ({tail}).")
    elif _extreme(rows, "committed_harm", None, best_high=False) is None:
        return out  # the study has no violation row at all
    for metric in ("authorized_tainted_action_success", "clean_benign_completion"):
        if metric in unmeasured:
            continue
        hi = _extreme(rows, metric, set(names) or None, best_high=True)
        if hi is None:
            continue
        who, h = hi
        ci = f"{_num(h['estimate'])} [{_num(h['ci_low'])}, {_num(h['ci_high'])}]"
        what = f"{TERMS[metric].display.lower()} ({scope_label(h['stage'])})"
        if not names:  # violation not measured: utility ranked over every defense
            out.append(f"{what[0].upper()}{what[1:]} is highest under {_names(who)}: {ci}.")
            continue
        lead = "Of those" if len(names) > 1 else f"Under {names[0]}"
        verb = f"is highest under {_names(who)}" if len(names) > 1 else "is"
        out.append(f"{lead}, {what} {verb}: {ci}.")
    return out


def zero_event_sentences(rows: list[dict[str, Any]]) -> list[str]:
    """One sentence per (quantity, N, clusters) group of defenses with no event."""
    groups: dict[tuple[str, str, int, int, float], list[str]] = {}
    for r in rows:
        if r["events"] == 0 and r["metric"] == "committed_harm":
            key = (r["metric"], r["stage"], r["n"], r["n_clusters"], r["zero_event_bound"])
            groups.setdefault(key, []).append(r["defense"])
    out = []
    for (metric, stage, n, k, bound), ds in groups.items():
        each = " each" if len(ds) > 1 else ""
        out.append(f"{_names(ds)}: no {TERMS[metric].display.lower()} in {n} rollouts{each} "
                   f"({scope_label(stage)}, {k} scenarios); the one-sided 95% upper bound is "
                   f"{100 * bound:.2f}% (scenario-cluster rule of three).")
    return out


def comparison_sentence(c: Comparison) -> str:
    """Eq. 12's paired delta of a claim-critical comparison, in words."""
    what = f"{TERMS[c.metric].display if c.metric in TERMS else c.metric} " \
           f"({scope_label(c.stage)})"
    if c.cluster is None or c.delta is None:
        return f"{what}: {c.b} vs {c.a}: no matched pairs."
    ci = f"[{_num(c.cluster.low, True)}, {_num(c.cluster.high, True)}]"
    pairs = f"{c.n_pairs} matched pairs, 95% scenario-cluster interval"
    if c.cluster.low == c.cluster.high == 0.0 and c.delta == 0:
        return f"{what}: {c.b} and {c.a} are identical on all {c.n_pairs} matched pairs."
    if c.cluster.crosses_zero:
        return (f"{what}: no difference between {c.b} and {c.a} can be claimed; "
                f"{c.b} - {c.a} = {_num(c.delta, True)} {ci} crosses zero ({pairs}).")
    word = "higher" if c.delta > 0 else "lower"
    good = "better" if c.interpretation.endswith(f"better than {c.a}") else "worse"
    return (f"{what}: {c.b} is {word} than {c.a} ({good}): {c.b} - {c.a} = "
            f"{_num(c.delta, True)} {ci} ({pairs}).")


# ------------------------------------------------------------------ documents


def document(ctx: Context, frame: pl.DataFrame, claims: Sequence[Comparison],
             figure: str | None, validity: Sequence[Gate] = (),
             extra: Sequence[str] = ()) -> dict[str, Any]:
    """``headline.json``: what the headline says, as data. ``validity``: the quantities the
    study did not measure (``analysis/validity.py``), said first and never ranked;
    ``extra``: sentences of other tables (utility per topology, ``analysis/topology.py``;
    the defenses' cost, ``analysis/defense_tables.py``)."""
    rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in frame.iter_rows(named=True)]
    present = {r["metric"] for r in rows}
    gates = [g for g in validity if g.metric in present]
    unmeasured = frozenset(g.metric for g in gates)
    quantities = []
    for col, stages in QUANTITIES:
        if col in present:
            quantities.append({"metric": col, "display": TERMS[col].display,
                               "stage": scope(stages), "equation": TERMS[col].equation,
                               "measured": col not in unmeasured})
    return {"schema": SCHEMA, "study": ctx.study, "models": ctx.models,
            "backends": ctx.backends, "simulated_agent": ctx.sim,
            "note": ctx.caption("").strip(), "question": QUESTION, "method": METHOD,
            "quantities": quantities, "findings": rows,
            "validity": [g.as_dict() for g in gates],
            # a claim the study cannot measure (no matched pairs: its stage or a defense is
            # absent, or its quantity was not measured) is left out, not stated as a finding
            "sentences": [g.sentence() for g in gates]
            + answer_sentences(rows, unmeasured)
            + [comparison_sentence(c) for c in claims
               if c.n_pairs and c.metric not in unmeasured]
            + (zero_event_sentences(rows) if "committed_harm" not in unmeasured else [])
            + list(extra),
            "figure": figure}


NOT_MEASURED = "not measured"


def unmeasured(doc: Mapping[str, Any]) -> set[str]:
    """The metrics a headline document says were not measured."""
    return {g["metric"] for g in doc.get("validity") or ()}


def _lines(doc: Mapping[str, Any], esc: Callable[[str], str], rule: str,
           two_line_head: bool = False) -> list[str]:
    """The table with aligned columns, then the sentences; ``esc`` escapes every cell.
    ``two_line_head``: the quantity on one header line and its stages on the next (the
    terminal's narrower table; Markdown has one header row)."""
    qs = doc["quantities"]
    scopes = ["", *(f"({scope_label(q['stage'])})" for q in qs)]
    head = ["defense"] + [q["display"] if two_line_head else
                          f"{q['display']} ({scope_label(q['stage'])})" for q in qs]
    by = {(r["defense"], r["metric"]): r for r in doc["findings"]}
    defenses = list(dict.fromkeys(r["defense"] for r in doc["findings"]))
    gated = unmeasured(doc)
    body = [[d] + [NOT_MEASURED if q["metric"] in gated and (d, q["metric"]) in by else
                   cell(by[(d, q["metric"])]) if (d, q["metric"]) in by else "N/A"
                   for q in qs] for d in defenses]
    ns = [sorted({by[(d, q["metric"])]["n"] for d in defenses if (d, q["metric"]) in by})
          for q in qs]
    body.append(["N per defense"] + [", ".join(map(str, n)) for n in ns])
    heads = [head, scopes] if two_line_head else [head]
    grid = [[esc(c) for c in row] for row in [*heads, *body]]
    w = [max(len(row[i]) for row in grid) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(row)) + " |"

    n = len(heads)
    return [*(fmt(r) for r in grid[:n]), "| " + " | ".join(rule * x for x in w) + " |",
            *(fmt(r) for r in grid[n:]), "", *(f"- {esc(x)}" for x in doc["sentences"])]


def markdown(doc: Mapping[str, Any]) -> str:
    """``headline.md``: the findings as a Markdown table (cells escaped, ``escape.py``)."""
    lines = [f"# Headline: study {md_text(doc['study'])}, model {md_text(doc['models'])}", "",
             *(f"**NOT MEASURED.** {md_text(g['sentence'])}" + "\n"
               for g in doc.get("validity") or ()),
             md_text(doc["note"]), "", md_text(doc["question"]),
             f"Estimates: {md_text(METHOD)}.", "", *_lines(doc, md_cell, "-")]
    return "\n".join(lines) + "\n"


def text(doc: Mapping[str, Any]) -> str:
    """The terminal's version: plain text, control characters shown as escapes."""
    from containmentbench.escape import visible

    lines = [f"Headline: study {visible(doc['study'])}, model {visible(doc['models'])}",
             *(f"NOT MEASURED: {visible(g['sentence'])}" for g in doc.get("validity") or ()),
             visible(doc["note"]), visible(doc["question"]), f"Estimates: {METHOD}.", "",
             *_lines(doc, visible, "-", two_line_head=True)]
    return "\n".join(lines) + "\n"


def write(found: Table, ctx: Context, claims: Sequence[Comparison], out: Path,
          validity: Sequence[Gate] = (), extra: Sequence[str] = ()) -> list[Path]:
    """The headline's figure (``figures/``) and ``tables/headline.{json,md}`` of the run
    folder ``out`` (``extra``: sentences of other tables, :func:`document`); returns the paths
    written."""
    from containmentbench.analysis import headline_figure
    from containmentbench.integrity import writer

    paths = headline_figure.draw(found.frame, ctx, out / "figures",
                                 {g.metric: g.reason for g in validity})
    png = f"figures/{headline_figure.NAME}.png"
    doc = document(ctx, found.frame, claims, png if (out / png).exists() else None, validity,
                   extra)
    writer.write_json(out / "tables" / "headline.json", doc, kind="tables", sort_keys=False)
    writer.write_text(out / "tables" / "headline.md", markdown(doc), kind="tables")
    return [*paths, out / "tables" / "headline.json", out / "tables" / "headline.md"]
