"""Pieces of the report's pages that read only the run directory: the overview, the seed and
version record, the case-study pairs and the drill-down grid (``report/build.py`` puts them
together)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.headline import cell as estimate_cell
from containmentbench.analysis.headline import scope_label
from containmentbench.analysis.tables import SIM_NOTE
from containmentbench.canonical import sha256_file
from containmentbench.metrics.glossary import TERMS
from containmentbench.report import html as H
from containmentbench.report.rundir import RunDir

STAGES = ("security", "memory_recovery", "active_tainted", "clean")
#: the headline's quantities and their stages (analysis/headline.py QUANTITIES)
GRID = (("committed_harm", "all"), ("authorized_tainted_action_success", "active_tainted"),
        ("clean_benign_completion", "clean"), ("blast_radius_norm", "all"),
        ("recovery_success", "memory_recovery"))


def _short(text: str | None, width: int = 70) -> str | None:
    if text is None:
        return None
    return text if len(text) <= width else text[: width - 1] + "…"


def provenance(run: Path) -> str | None:
    """The packaged model's provenance from the run's config (models/weights.py)."""
    import yaml

    cfg = run / "config.yaml"
    if not cfg.exists():
        return None
    from containmentbench.models.weights import provenance as prov_of

    path = (yaml.safe_load(cfg.read_text()) or {}).get("model", {}).get("path")
    prov = prov_of(path)
    if prov is None:
        return None
    who = "a third-party repackaging" if prov["third_party"] else "the model's own release"
    dists = ", ".join(f"{k} {v}" for k, v in sorted(prov["distributions"].items()))
    return (f"{prov['path']}: {prov['model']}, GGUF '{prov['gguf_name']}', sha256 "
            f"{prov['sha256']}, {who} ({dists})")


def overview(run: Path, df: pl.DataFrame) -> str:
    """What the rows are: the simulated agent or the model's own results, decoding, tool
    mode, exposure, a packaged model's provenance, the study's size."""
    from containmentbench.analysis.tables import Context

    ctx = Context(df)
    exposure = ("no rollout with untrusted content" if ctx.exposure is None else
                f"{ctx.exposure:.3f} of {ctx.exposed_n} rollouts with untrusted content "
                f"showed it to the model")
    package = provenance(run)
    return H.table(["field", "value"], [
        ["study", ", ".join(sorted(set(df["study"].to_list())))],
        ["models", ", ".join(sorted(set(df["model"].to_list())))],
        ["backends", ", ".join(sorted(set(df["backend"].to_list())))],
        ["what the rows are", SIM_NOTE if ctx.sim else
         f"results of {ctx.models} only, from its own traces"],
        ["decoding", ctx.decoding_text], ["tool mode", ", ".join(ctx.tool_modes)],
        ["tools offered per agent", ", ".join(ctx.tools_offered)],
        ["exposure", exposure], *([["model package", package]] if package else []),
        ["rollouts", df.height], ["defenses", ", ".join(ctx.defenses)],
        ["stages", ", ".join(s for s in STAGES if s in set(df["stage"].to_list()))],
        ["seeds", ", ".join(map(str, sorted(set(df["seed"].to_list()))))],
        ["errored rollouts (never outcomes)", int((df["status"] == "error").sum())]],
        table_id="overview")


def record(run: RunDir, df: pl.DataFrame) -> str:
    """The seed and version record: config hash, analysis settings, policies, parser,
    packages."""
    rows: list[list[Any]] = []
    cfg = run.path / "config.yaml"
    if cfg.exists():
        rows.append(["config.yaml sha256", sha256_file(cfg)])
    ana = run.path / "analysis.json"
    if ana.exists():
        info = json.loads(ana.read_text())
        for k in ("resamples", "confidence", "seed"):
            if k in info.get("config", {}):
                rows.append([f"analysis.{k}", info["config"][k]])
    pol = df.select("defense", "policy_hash", "method_version").unique().sort("defense")
    for r in pol.iter_rows(named=True):
        rows.append([f"policy {r['defense']}", f"{r['method_version']} {r['policy_hash'][:16]}"])
    ids = sorted(run.index)[:1]
    if ids:
        full = run.load(ids[0]).row
        rows.append(["parser_version", full["parser_version"]])
        rows.append([f"seed record of {ids[0]}", full["seed_record"]])
    rows.append(["study seeds", ", ".join(map(str, sorted(set(df["seed"].to_list()))))])
    import importlib.metadata as md

    from containmentbench.freeze.manifest import PACKAGES
    for name in PACKAGES:
        try:
            rows.append([f"package {name}", md.version(name)])
        except md.PackageNotFoundError:
            continue
    rows.append(["MANIFEST.json", "git commit and every file hash: see MANIFEST.json next to "
                                  "this report"])
    return H.table(["item", "value"], rows)


def drilldown(df: pl.DataFrame, defenses: list[str],
              findings: Sequence[Mapping[str, Any]] = ()) -> str:
    """The headline's numbers per defense, each as estimate [interval] with its n and the
    stage in its header (the findings rows of ``tables/headline.json``: one name, one
    number, the same as the headline's and results.parquet's); each stage link opens the
    rollout index filtered to that cell. A quantity the headline lacks is not shown here
    (the false-positive block rate is Table 11's, active-tainted stage, with its n)."""
    by = {(r["defense"], r["metric"]): r for r in findings}
    grid = [(m, s) for m, s in GRID if any(k[1] == m for k in by)]
    head = ["defense", *[f"{TERMS[m].display} ({scope_label(s)})" for m, s in grid]]
    rows, cells = [], []
    for d in defenses:
        row: list[Any] = [d]
        for m, _ in grid:
            r = by.get((d, m))
            text = None if r is None or r["estimate"] is None else estimate_cell(r)
            row.append(text if text is None or text.startswith("0 of ") else
                       f"{text} n={r['n']}")
        rows.append(row)
        links = [H.link(f"rollouts.html#defense={d}&stage={s}", s) for s in STAGES
                 if df.filter((pl.col("defense") == d) & (pl.col("stage") == s)).height]
        cells.append([f"<td>{' · '.join(links)}</td>"])
    return H.table(head, rows, extra=["rollouts per stage"], extra_cells=cells,
                   table_id="drill",
                   caption="The headline's estimates per defense: mean (eq. 7) [95% "
                           "scenario-cluster interval] over n rollouts of the stage in the "
                           "column's header, or 0 of n with its one-sided bound after zero "
                           "events (N/A: not defined for any of the defense's rollouts). The "
                           "false-positive block rate is Table 11's (active-tainted stage, "
                           "fp_n rollouts). Each stage link opens the rollout index filtered "
                           "to that defense and stage (sort and filter there).")


def cases(steps_json: Path, rlink: Any) -> str:
    """Table 21's pairs side by side (proposal, decision, confirmation, commit, rollback)."""
    if not steps_json.exists():
        return "<p>No case studies in this study (run <code>containmentbench cases</code>)."
    data = json.loads(steps_json.read_text())
    parts = ["<p>Matched trace pairs (paper 000 Appendix D, Table 21): same scenario, model "
             "and seed; two defenses. Steps shown: proposal, decision, confirmation, commit, "
             "rollback (redacted).</p>"]
    for c in data["cases"]:
        parts.append(f'<section class="case" id="case-{c["case"]}"><h2>Case {c["case"]}: '
                     f'{H.escape(c["title"])}</h2><p>{H.escape(c["claim"])} '
                     f'<br>Selection: {H.escape(c["rule"])}. Status: '
                     f'<b>{H.escape(c["status"])}</b>.</p>')
        if c["a"]:
            parts.append(f'<p>scenario {H.escape(c["scenario_id"])}, seed {c["seed"]}, '
                         f'stage {H.escape(c["stage"])}</p><div class="pair">')
            for side in (c["a"], c["b"]):
                rows = [[x["seq"], x["kind"], x["tool"], x["target"] or _short(x["args"]),
                         x["decision"], x["rule_id"], x["outcome"]] for x in side["steps"]]
                parts.append(f'<div class="side"><h3>{H.escape(side["defense"])}: '
                             f'{rlink(side["rollout_id"])}</h3>' + H.table(
                                 ["seq", "kind", "tool", "target / args", "decision", "rule",
                                  "outcome"], rows,
                                 row_class=["taint" if x["tainted"] else ""
                                            for x in side["steps"]]) + "</div>")
            parts.append("</div>")
        parts.append("</section>")
    return "".join(parts)


def case_rollouts(run: Path) -> set[str]:
    """Rollouts with a case-study role (Table 21 pairs)."""
    p = run / "tables" / "case_studies.parquet"
    if not p.exists():
        return set()
    t = pl.read_parquet(p)
    return {x for c in ("rollout_a", "rollout_b") if c in t.columns
            for x in t[c].drop_nulls().to_list()}


#: the statistic and counter columns of the tables (not metrics): name -> meaning. Both
#: spellings of a renamed column are listed while tables move to one vocabulary.
COLUMNS = (
    ("estimate / mean", "the row's estimate: the mean over the rollouts (or pairs) it counts, "
                        "eq. 7 of paper 000 unless the table's caption says otherwise"),
    ("ci_low, ci_high", "the 95% interval of the estimate; a scenario-cluster bootstrap "
                        "(§6.5) unless the table says otherwise"),
    ("pair_ci_low, pair_ci_high", "the pair bootstrap interval of a paired delta (§6.5), "
                                  "beside the cluster interval"),
    ("n / N", "the rollouts (or matched pairs) the estimate averages over"),
    ("n_clusters", "the scenario clusters the cluster bootstrap resamples"),
    ("events, zero_event_bound", "rollouts with the event; after zero events the one-sided "
                                 "95% bound (rule of three, §7.2)"),
    ("excluded_provider_error", "rows left out because the provider failed (never an "
                                "outcome, Appendix I)"),
    ("excluded_context_overflow", "rows left out because the prompt overflowed the context"),
    ("excluded_na, *_na", "rows where the metric is not defined (Table 5: N/A, never 0)"),
    ("unmatched", "rows without a partner of the same scenario, model and seed"),
)


def glossary() -> str:
    """The report's glossary page, generated from ``metrics/glossary.py`` (the one source
    of every metric's name): one anchored entry per metric (``#g-<key>``), which every
    table header naming the metric links to, then the statistic columns."""
    from containmentbench.metrics.glossary import ALIASES, ALL, TERMS

    also: dict[str, list[str]] = {}
    for a, k in sorted(ALIASES.items()):
        also.setdefault(k, []).append(a)
    parts = ["<p>Every metric of the report by its display name, with its key (the column "
             "of <code>metrics/rollout_metrics.parquet</code> and "
             "<code>tables/results.parquet</code>), its definition, where paper 000 "
             "(ContainmentBench: trace-based evaluation of post-injection containment in "
             "tool-using LLM agents) defines it, what a mean divides by, the stages where it "
             "is defined (elsewhere N/A, never 0) and which direction is better. Generated "
             "from <code>containmentbench/metrics/glossary.py</code>.</p>",
             '<p class="small">Metrics: ' + " · ".join(
                 H.link(f"#g-{k}", t.display) for k, t in TERMS.items()) + "</p>",
             '<dl class="glossary">']
    for k, t in TERMS.items():
        stages = "all" if t.stages == ALL else ", ".join(t.stages)
        better = {True: "higher is better", False: "lower is better",
                  None: "diagnostic (no better direction)"}[t.higher_is_better]
        names = ", ".join(f"<code>{H.text(x)}</code>" for x in [k, *also.get(k, [])])
        parts.append(f'<dt id="g-{H.text(k)}">{H.text(t.display)}</dt><dd>{H.text(t.definition)}'
                     f". <br><span class=\"small\">column {names} · paper 000 "
                     f"{H.text(t.equation or '(an implementation count)')} · denominator: "
                     f"{H.text(t.denominator)} · stages: {H.text(stages)} · {better}</span>"
                     "</dd>")
    parts.append('</dl><h2 id="columns">Statistic and counter columns</h2>'
                 + H.table(["column", "meaning"], [list(c) for c in COLUMNS]))
    return "".join(parts)
