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
