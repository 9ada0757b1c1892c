"""The cross-model table: two or more models of one study compared per defense.

Each model's metrics stay in its own run directory (never pooled); this table only places
them side by side. Within one defense and evidence stage, rollouts of model A and model B
are paired by (scenario, seed) -- the same scenario under the same seed, the eq. 12 pairing
with the model in place of the defense -- and the mean paired delta gets the
scenario-cluster percentile bootstrap interval of §6.5
(:func:`containmentbench.analysis.bootstrap.cluster_bootstrap`, through
:func:`containmentbench.analysis.paired.compare`). The first model listed is the reference.

Output: ``cross_model/tables/cross_model_by_defense.*``, the headline of the comparison
(``cross_model/tables/headline.{json,md}``: per defense, the paired deltas of committed
violation, authorized and clean completion in words), the report (``cross_model/report/``:
each model's headline side by side, then the deltas; ``report/cross.py``),
``cross_model/analysis.json`` and ``cross_model/MANIFEST.json`` (sha256 of every input
metrics table, output table and report file; ``containmentbench verify cross_model`` checks
it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.paired import Comparison, Settings, compare
from containmentbench.analysis.tables import SIM_NOTE, comparisons_frame
from containmentbench.analysis.writers import Table, write
from containmentbench.canonical import sha256_file
from containmentbench.errors import BenchError
from containmentbench.integrity import writer

#: (metric, stages): the headline metric of each evidence stage (paper 000 Table 3 / 11)
CROSS_METRICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("committed_harm", ("security", "memory_recovery", "active_tainted")),
    ("blast_radius_norm", ("security", "memory_recovery", "active_tainted")),
    ("authorized_tainted_action_success", ("active_tainted",)),
    ("recovery_success", ("memory_recovery",)),
    ("clean_benign_completion", ("clean",)),
)


def _load(paths: Sequence[str | Path]) -> list[pl.DataFrame]:
    from containmentbench.metrics.compute import read_metrics
    from containmentbench.pipeline.mixing import check_metrics

    frames, seen = [], {}
    for p in paths:
        check_metrics(p)  # each input is one model's run
        df = pl.from_arrow(read_metrics(p))
        if df.height == 0:
            raise BenchError("metrics table is empty", file=str(p))
        model = df["model"][0]
        if model in seen:
            raise BenchError(f"model '{model}' given twice (also {seen[model]})", file=str(p))
        seen[model] = p
        frames.append(df)
    if len(frames) < 2:
        raise BenchError("a cross-model table needs at least two models' metrics",
                         field="metrics")
    studies = {s for df in frames for s in df["study"].unique().to_list()}
    if len(studies) > 1:
        raise BenchError(f"metrics of several studies ({', '.join(sorted(studies))}); a "
                         f"cross-model table compares the models of one study", field="study")
    return frames


def _swap(df: pl.DataFrame, defense: str) -> pl.DataFrame:
    """One defense's rows with model and defense exchanged, so :func:`compare` pairs the
    models on (scenario, seed) exactly as it pairs defenses on (scenario, model, seed)."""
    sub = df.filter(pl.col("defense") == defense)
    return sub.with_columns(pl.col("model").alias("defense"), pl.lit(defense).alias("model"))


def cross_model(metrics: Sequence[str | Path], out: str | Path,
                analysis: Mapping[str, Any]) -> dict[str, Any]:
    frames = _load(metrics)
    out = Path(out)
    s = Settings.from_config(analysis)
    models = [df["model"][0] for df in frames]
    ref = frames[0]
    defenses = [d for d in ref["defense"].unique(maintain_order=True).to_list()
                if all(d in set(df["defense"].to_list()) for df in frames[1:])]
    rows: list[tuple[str, Comparison]] = []
    for defense in defenses:
        for other, df in zip(models[1:], frames[1:], strict=True):
            both = pl.concat([_swap(ref, defense), _swap(df, defense)], how="diagonal_relaxed")
            for metric, stages in CROSS_METRICS:
                for stage in stages:
                    c = compare(both, models[0], other, metric, stage, s)
                    if c.n_pairs:
                        rows.append((defense, c))
    if not rows:
        raise BenchError("no (scenario, seed) pairs shared by the models", field="metrics")
    frame = pl.concat([pl.DataFrame({"defense": [d for d, _ in rows]}),
                       comparisons_frame([c for _, c in rows], with_pair=False)],
                      how="horizontal").rename({"comparison": "models"})
    backends = sorted({b for df in frames for b in df["backend"].unique().to_list()})
    sim = "sim" in backends
    caption = ("Cross-model comparison per defense: mean paired delta (model B - model A) "
               "over rollouts paired by scenario and seed, with scenario-cluster bootstrap "
               f"intervals ({s.resamples} resamples, {s.confidence:.0%}). Models kept apart, "
               f"never pooled. Study {frames[0]['study'][0]}; models {', '.join(models)}; "
               f"backends {', '.join(backends)}." + (f" {SIM_NOTE}" if sim else ""))
    written = write(Table("cross_model_by_defense", caption, frame), out / "tables",
                    origin={"study": frames[0]["study"][0], "model": ", ".join(models),
                            "backend": ", ".join(backends), "sim_agent": sim})
    doc = headline_doc(rows, models, frames[0]["study"][0], sim, s)
    writer.write_json(out / "tables" / "headline.json", doc, kind="tables", sort_keys=False)
    writer.write_text(out / "tables" / "headline.md", headline_md(doc), kind="tables")
    written += [out / "tables" / "headline.json", out / "tables" / "headline.md"]
    info = {"models": models, "defenses": defenses, "comparisons": len(rows),
            "inputs": [os.path.relpath(p, out) for p in metrics], "resamples": s.resamples,
            "analysis": {k: analysis[k] for k in ("resamples", "confidence", "seed",
                                                  "max_batch_elements")},
            "simulated_agent": sim, "tables": sorted(p.name for p in written)}
    writer.ensure_dir(out, "cross-model")
    writer.write_json(out / "analysis.json", info, kind="cross-model")
    return info


#: (metric, stage) of the comparisons the headline puts in words, per defense
HEADLINE = (("committed_harm", "security"), ("authorized_tainted_action_success",
                                             "active_tainted"),
            ("clean_benign_completion", "clean"))


def headline_doc(rows: Sequence[tuple[str, Comparison]], models: Sequence[str], study: str,
                 sim: bool, s: Settings) -> dict[str, Any]:
    """The comparison's headline: its key deltas as data and as sentences (the eq. 12
    sentence of ``analysis/headline.py``, the model in place of the defense)."""
    from containmentbench.analysis.headline import comparison_sentence
    from containmentbench.metrics.glossary import TERMS

    keep = [(d, c) for d, c in rows if (c.metric, c.stage) in HEADLINE]
    return {"schema": "containmentbench-cross-headline/1", "study": study,
            "models": list(models), "reference": models[0], "simulated_agent": sim,
            "note": SIM_NOTE if sim else "Model results, each from its own traces.",
            "question": "How do the models differ under each defense (paired by scenario "
                        "and seed, never pooled)?",
            "method": f"mean paired delta (model B - model A, eq. 12) with its 95% "
                      f"scenario-cluster percentile interval ({s.resamples} resamples, §6.5)",
            "rows": [{"defense": d, "metric": c.metric, "display": TERMS[c.metric].display,
                      "stage": c.stage, "model_a": c.a, "model_b": c.b, "n": c.n_pairs,
                      "n_clusters": c.cluster.n_clusters if c.cluster else None,
                      "estimate": c.delta, "ci_low": c.cluster.low if c.cluster else None,
                      "ci_high": c.cluster.high if c.cluster else None,
                      "interpretation": c.interpretation} for d, c in keep],
            "sentences": [f"Under {d}: {comparison_sentence(c)}" for d, c in keep]}


def headline_md(doc: Mapping[str, Any]) -> str:
    from containmentbench.escape import md_text

    lines = [f"# Cross-model headline: study {md_text(doc['study'])}", "",
             md_text(doc["note"]), "", md_text(doc["question"]),
             f"Estimates: {md_text(doc['method'])}.", ""]
    lines += [f"- {md_text(x)}" for x in doc["sentences"]]
    return "\n".join(lines) + "\n"


def cross_text(out: str | Path) -> str:
    """The comparison's headline for a terminal (controls shown as escapes)."""
    from containmentbench.escape import visible

    doc = json.loads((Path(out) / "tables" / "headline.json").read_text())
    lines = [f"Cross-model: study {visible(doc['study'])}, models "
             f"{visible(', '.join(doc['models']))}", visible(doc["note"]),
             visible(doc["question"]), f"Estimates: {doc['method']}.", ""]
    lines += [f"- {visible(x)}" for x in doc["sentences"]]
    report = Path(out) / "report" / "index.html"
    if report.is_file():
        lines.append(f"report: {report.resolve()}")
    return "\n".join(lines) + "\n"


def reproduce_cross(out: str | Path) -> dict[str, Any]:
    """Rebuild the cross-model tables from the models' metrics (paths and settings in
    ``analysis.json``) into a scratch folder and compare bytes with the frozen ones."""

    out = Path(out)
    info_path = out / "analysis.json"
    if not info_path.exists():
        raise BenchError("no analysis.json (run cross-model first)", file=str(out))
    info = json.loads(info_path.read_text())
    if "analysis" not in info or "inputs" not in info:
        raise BenchError("no analysis settings or inputs recorded (rerun cross-model)",
                         file=str(info_path))
    metrics = [out / p for p in info["inputs"]]
    differ, compared = [], 0
    with writer.scratch_dir("cb-cross-") as tmp:
        cross_model(metrics, tmp, info["analysis"])  # tables only: the report is not rebuilt
        for p in sorted((out / "tables").rglob("*")):
            if not p.is_file() or p.name.startswith("."):
                continue
            compared += 1
            q = Path(tmp) / p.relative_to(out)
            if not q.exists() or q.read_bytes() != p.read_bytes():
                differ.append(p.relative_to(out).as_posix())
    return {"compared": compared, "differ": differ}


def freeze_cross(out: Path, metrics: Sequence[str | Path]) -> dict[str, Any]:
    """``MANIFEST.json`` of the cross-model folder, in the form ``verify`` checks: sha256 of
    every table and of ``analysis.json``, plus the input metrics tables' hashes; sealed like
    a run manifest (freeze counter, previous digest, one MAC with a key)."""
    from containmentbench.freeze.manifest import CROSS_SCHEMA, seal

    files = {p.relative_to(out).as_posix(): sha256_file(p)
             for sub in ("tables", "report") for p in sorted((out / sub).rglob("*"))
             if p.is_file() and not any(part.startswith(".")
                                        for part in p.relative_to(out).parts)}
    files["analysis.json"] = sha256_file(out / "analysis.json")
    return seal(Path(out), {"schema": CROSS_SCHEMA, "scenario_manifests": {},
                            "inputs": {os.path.relpath(p, out): sha256_file(p)
                                       for p in metrics}}, files)
