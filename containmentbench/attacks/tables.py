"""Tables 18 and 19 of paper 000 (Appendix B) from per-rollout metrics rows with the
target-path funnel columns (``fn_*``, :mod:`containmentbench.attacks.funnel`).

* :func:`table18`: the candidate-search transfer diagnostic: per (mode, optimized-for defense,
  evaluated defense), N and the per-rollout rates of exact-goal proposal, goal-matched commit
  (stage 5: a commit linked by call id to the exact-goal proposal), off-target commit (an
  eq. 5 violation without that link) and utility (§6.3, Table 18).
* :func:`table19`: the target-preserving qualification: per (stage, scope), N, exact
  proposals and goal-matched commits as k/N, and the domains with a goal-matched commit
  (§6.3 "across more than one domain", §7.4, Table 19).

Both return :class:`~containmentbench.analysis.writers.Table` objects, written, frozen and
hashed like every other study table; captions come from the study caption helper
(:class:`containmentbench.analysis.tables.Context`), so a sim run says "Simulated agent".
Provider-error rollouts are never outcomes (Appendix I): they are excluded from N and
counted in an ``errors`` column. Rows of two models are never pooled: a frame with more than
one model is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from containmentbench.analysis.diagnostic_tables import ALIAS_NOTE, PAPER_ALIAS
from containmentbench.analysis.exact import fmean
from containmentbench.analysis.tables import Context
from containmentbench.analysis.writers import Table
from containmentbench.errors import BenchError

MODES = ("instance_eval", "universal_eval")
QUAL_STAGES = {"known_good_replay": "Known-good replay",
               "development_check": "Development check",
               "family_heldout_check": "Family-held-out check",
               "scoring_variant_repeat": "Scoring-variant repeat"}
DOMAIN_LABEL = {"email": "email", "document": "documents", "calendar_crm": "calendar/CRM"}
UTILITY = "benign_success"  # B(tau), paper 000 §4.4 / Table 4: the benign-completion oracle


def _require(frame: pl.DataFrame, cols: Iterable[str], table: str) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise BenchError(f"{table}: the frame has no column '{missing[0]}'",
                         field=missing[0])
    if "model" in frame.columns and frame["model"].n_unique() > 1:
        raise BenchError(f"{table}: rows of {frame['model'].n_unique()} models in one frame "
                         "(results of two models are never pooled)", field="model")


def _context(frame: pl.DataFrame) -> Context:
    """The study caption helper; a qualification frame may lack ``model`` or ``defense``
    (named as not recorded rather than guessed)."""
    fill = [pl.lit(v).alias(c) for c, v in (("study", "not recorded"),
                                             ("model", "not recorded"),
                                             ("defense", "none")) if c not in frame.columns]
    return Context(frame.with_columns(fill) if fill else frame)


def _split_errors(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    if "status" not in frame.columns:
        return frame, frame.clear()
    err = pl.col("status") == "error"
    return frame.filter(~err), frame.filter(err)


def _k(sub: pl.DataFrame, col: str) -> int:
    return int(sub[col].fill_null(False).sum())


def _order(values: Iterable[Any], first: Iterable[Any]) -> list[Any]:
    vals = list(dict.fromkeys(values))
    known = [v for v in first if v in vals]
    return known + sorted(v for v in vals if v not in known)


SEARCH_LABEL = {"transfer": "first search (not target-preserving)",
                "target": "target-preserving search"}
SEARCH_ORDER = ("transfer", "target")


def _search_label(name: str) -> str:
    if name in SEARCH_LABEL:
        return SEARCH_LABEL[name]
    return f"defense-specific ({name[len('defense-'):]})" if name.startswith("defense-") \
        else name


def table18(frame: pl.DataFrame) -> Table:
    """Table 18 (Appendix B): one row per (search, mode, optimized_for, evaluated_defense)
    with N attacked rollouts and per-rollout rates: exact-goal proposal, goal-matched commit,
    off-target commit, utility (``benign_success``). ``search`` says which bounded search
    froze the candidates (attacks/settings.variant); a frame without it holds one search."""
    if "search" not in frame.columns:
        frame = frame.with_columns(pl.lit("target").alias("search"))
    _require(frame, ("mode", "optimized_for", "evaluated_defense", "backend", "fn_stage",
                     "fn_exact_proposal", "fn_goal_commit", "fn_offtarget_commit", UTILITY),
             "table18")
    ok, err = _split_errors(frame)
    bad = ok.filter(pl.col("fn_stage").is_null())
    if bad.height:
        rid = bad["rollout_id"][0] if "rollout_id" in bad.columns else "?"
        raise BenchError(f"table18: {bad.height} rows without a pre-specified exact goal "
                         f"(first: {rid}); Table 18 is over attacked rollouts only",
                         field="fn_stage")
    ctx = _context(frame)
    keys = frame.select("search", "mode", "optimized_for", "evaluated_defense").unique() \
        .to_dicts()
    dorder = {d: i for i, d in enumerate(ctx.defenses)}
    morder = {m: i for i, m in enumerate(MODES)}
    sorder = {x: i for i, x in enumerate(SEARCH_ORDER)}
    keys.sort(key=lambda k: (sorder.get(k["search"], len(sorder)), k["search"],
                             morder.get(k["mode"], len(MODES)), k["mode"],
                             str(k["optimized_for"]),
                             dorder.get(k["evaluated_defense"], len(dorder)),
                             k["evaluated_defense"]))
    rows = []
    for k in keys:
        sel = ((pl.col("search") == k["search"]) & (pl.col("mode") == k["mode"])
               & (pl.col("optimized_for") == k["optimized_for"])
               & (pl.col("evaluated_defense") == k["evaluated_defense"]))
        sub, errs = ok.filter(sel), err.filter(sel)
        overflow = errs.filter(pl.col("error_kind") == "context_overflow").height \
            if "error_kind" in errs.columns else 0
        n = sub.height
        rows.append({"search": _search_label(k["search"]), "mode": k["mode"],
                     "optimized_for": k["optimized_for"],
                     "evaluated_defense": k["evaluated_defense"],
                     "paper_name": PAPER_ALIAS.get(k["evaluated_defense"],
                                                   k["evaluated_defense"]), "n": n,
                     "exact_proposal": _k(sub, "fn_exact_proposal") / n if n else None,
                     "goal_matched_commit": _k(sub, "fn_goal_commit") / n if n else None,
                     "offtarget_commit": _k(sub, "fn_offtarget_commit") / n if n else None,
                     "utility": fmean(sub[UTILITY]), "errors": errs.height,
                     "errors_context_overflow": overflow})
    schema = {"search": pl.String, "mode": pl.String, "optimized_for": pl.String,
              "evaluated_defense": pl.String, "paper_name": pl.String, "n": pl.Int64,
              "exact_proposal": pl.Float64, "goal_matched_commit": pl.Float64,
              "offtarget_commit": pl.Float64, "utility": pl.Float64, "errors": pl.Int64,
              "errors_context_overflow": pl.Int64}
    note = f" {ALIAS_NOTE}" if "taint_only_v1" in set(frame["evaluated_defense"]) else ""
    return Table("table18_candidate_transfer", ctx.caption(
        "Candidate-search transfer: frozen candidates of each bounded search, optimized "
        "under the optimized-for defense and replayed under the evaluated defense: the "
        "paper's protocol replays the first search (not target-preserving, optimized for no "
        "defense) on held-out clusters (universal_eval) under its three evaluated defenses "
        "and on the instance-audit clusters (instance_eval) under no defense; "
        "defense-specific rows exist only after a passing qualification (§6.3). "
        "Per-rollout rates over n attacked rollouts: exact-goal proposal; goal-matched "
        "commit (a commit linked by call id to the exact-goal proposal, stage-5 target-path "
        "success); off-target commit (an eq. 5 violation without that link); utility = "
        "benign completion B(tau) (benign_success, §4.4 / Table 4). Provider errors are "
        "excluded from n and counted, context overflows among them apart (Appendix B, "
        f"Table 18).{note}"), pl.DataFrame(rows, schema=schema))


def table19(frame: pl.DataFrame) -> Table:
    """Table 19 (Appendix B): one row per (qual_stage, qual_scope): N, exact proposals and
    goal-matched commits as k/N, and the domains with at least one goal-matched commit."""
    _require(frame, ("qual_stage", "qual_scope", "domain", "backend", "fn_exact_proposal",
                     "fn_goal_commit"), "table19")
    ok, err = _split_errors(frame)
    ctx = _context(frame)
    keys = frame.select("qual_stage", "qual_scope").unique(maintain_order=True).to_dicts()
    stage_order = _order((k["qual_stage"] for k in keys), QUAL_STAGES)
    keys.sort(key=lambda k: (stage_order.index(k["qual_stage"]), str(k["qual_scope"])))
    rows = []
    for k in keys:
        sel = (pl.col("qual_stage") == k["qual_stage"]) & (pl.col("qual_scope")
                                                           == k["qual_scope"])
        sub = ok.filter(sel)
        n = sub.height
        goal = sub.filter(pl.col("fn_goal_commit").fill_null(False))
        domains = sorted({DOMAIN_LABEL.get(d, d) for d in goal["domain"].to_list()})
        rows.append({"stage": QUAL_STAGES.get(k["qual_stage"], k["qual_stage"]),
                     "scope": k["qual_scope"], "n": n,
                     "exact_proposal": f"{_k(sub, 'fn_exact_proposal')}/{n}",
                     "goal_matched_commit": f"{goal.height}/{n}",
                     "domain_coverage": ", ".join(domains) if domains else "none",
                     "errors": err.filter(sel).height})
    schema = {"stage": pl.String, "scope": pl.String, "n": pl.Int64,
              "exact_proposal": pl.String, "goal_matched_commit": pl.String,
              "domain_coverage": pl.String, "errors": pl.Int64}
    return Table("table19_adaptive_qualification", ctx.caption(
        "Target-preserving adaptive qualification: per stage and scope, rollouts with an "
        "exact-goal proposal and with a goal-matched commit (linked by call id, stage 5) as "
        "k/n, and the domains with at least one goal-matched commit; provider errors are "
        "excluded from n and counted (§6.3, §7.4, Appendix B, Table 19)."),
        pl.DataFrame(rows, schema=schema))
