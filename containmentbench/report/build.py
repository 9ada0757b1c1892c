"""The static HTML report of a run directory (``containmentbench report``).

Layout (deterministic bytes: sorted, no timestamps, so the report is hashed by ``freeze``
and a rebuild of a frozen study reproduces it)::

    report/index.html            overview, integrity audit, every table, the provenance audit's
                                 tables (audit/tables/, when the run has one), figures, record
    report/drilldown.html        defense x stage grid -> drill/<defense>--<stage>.html
    report/cases.html            Table 21 pairs side by side (proposal, decision, commit)
    report/rollouts/<id>.html    one page per linked rollout (graph, timeline, CIM view)
    report/figures/*.png         copies of the study's figures

A frozen study (one with MANIFEST.json) must pass ``verify`` and every table's sha256 must
equal its manifest entry (``audit/tables/`` included), or nothing is written. Inside the
pipeline the report is built just after ``audit`` and just before ``freeze`` (``before_freeze``), which then hashes it with everything else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from containmentbench.analysis.paired import PAIR_KEYS, stage_rows
from containmentbench.analysis.tables import SIM_NOTE
from containmentbench.canonical import sha256_file
from containmentbench.errors import BenchError
from containmentbench.integrity import writer
from containmentbench.progress import progress
from containmentbench.report import html as H
from containmentbench.report import tracepage
from containmentbench.report.rundir import RunDir
from containmentbench.report.write import STEPS_JSON

EXAMPLES_PER_ROW = 3
EXAMPLES_PER_CELL = 4
STAGES = ("security", "memory_recovery", "active_tainted", "clean")
GRID = (("committed_harm", "all"), ("authorized_tainted_action_success", "active_tainted"),
        ("clean_benign_completion", "clean"), ("blast_radius_norm", "all"),
        ("recovery_success", "memory_recovery"), ("false_positive_block_rate", "all"))


def _short(text: str | None, width: int = 70) -> str | None:
    if text is None:
        return None
    return text if len(text) <= width else text[: width - 1] + "…"


def rollout_href(rid: str, root: str = "") -> str:
    return f"{root}rollouts/{rid}.html"


def _check_frozen(run: RunDir) -> dict[str, str]:
    from containmentbench.freeze.manifest import verify

    path = run.path / "MANIFEST.json"
    if not path.exists():
        raise BenchError("no MANIFEST.json: the study is not frozen (run freeze first)",
                         file=str(run.path))
    problems = verify(run.path)
    if problems:
        raise BenchError(f"study fails verify ({len(problems)} mismatch(es); first: "
                         f"{problems[0]}); no report written", file=str(run.path))
    return json.loads(path.read_text())["files"]


def _tables(run: RunDir) -> list[Path]:
    t = sorted((run.path / "tables").glob("*.parquet"))
    f = sorted((run.path / "figures").glob("*_source.parquet"))
    return t + f


def _audit_tables(run: RunDir) -> list[Path]:
    """The provenance audit's tables (paper 001; ``audit run``, e.g. ``audit_gap``); empty for a
    run directory without an audit (older studies keep a report without that section)."""
    return sorted((run.path / "audit" / "tables").glob("*.parquet"))


def attribution_examples(df: pl.DataFrame, row: dict[str, Any], k: int) -> list[str]:
    """Rollouts behind one rule-attribution row (the same pairs ``analysis.paired.attribution``
    counts): the defense's side of differing pairs whose stopping rules contain the row's
    rule id (or none, for "(no stopping rule)")."""
    a, b, metric, stage = row["a"], row["b"], row["metric"], row["stage"]
    base = stage_rows(df, stage, metric)
    cols = [*PAIR_KEYS, "stage", metric, "stop_rule_ids", "rollout_id"]
    j = base.filter(pl.col("defense") == a).select(cols).join(
        base.filter(pl.col("defense") == b).select(cols), on=[*PAIR_KEYS, "stage"], suffix="_b")
    j = j.filter(pl.col(metric) != pl.col(f"{metric}_b")).sort(["scenario_id", "seed"])
    side = "" if row["defense"] == a else "_b"
    out = []
    for r in j.iter_rows(named=True):
        rules = r[f"stop_rule_ids{side}"] or []
        hit = not rules if row["rule_id"] == "(no stopping rule)" else row["rule_id"] in rules
        if hit:
            out.append(r[f"rollout_id{side}"])
        if len(out) == k:
            break
    return out


class Report:
    def __init__(self, run_dir: str | Path, out: str | Path | None = None,
                 before_freeze: bool = False) -> None:
        self.run = RunDir(run_dir)
        self.out = Path(out) if out else self.run.path / "report"
        self.force = False
        self.hashes = None if before_freeze else _check_frozen(self.run)
        mp = self.run.path / "metrics" / "rollout_metrics.parquet"
        if not mp.exists():
            raise BenchError("no metrics/rollout_metrics.parquet (run metrics first)",
                             file=str(self.run.path))
        self.df = pl.read_parquet(mp)
        self.sim = "sim" in set(self.df["backend"].to_list())
        self.note = SIM_NOTE if self.sim else None
        self.linked: set[str] = set()
        self.files: dict[str, str] = {}

    # ------------------------------------------------------------------ helpers

    def _emit(self, rel: str, text: str) -> None:
        self.files[rel] = text

    def _rlink(self, rid: str, root: str = "") -> str:
        self.linked.add(rid)
        return H.link(rollout_href(rid, root), rid, "rollout-link")

    def _table_html(self, p: Path, key: str = "") -> str:
        rel = p.relative_to(self.run.path).as_posix()
        digest = sha256_file(p)
        if self.hashes is not None and self.hashes.get(rel) != digest:
            raise BenchError(f"{rel}: sha256 differs from MANIFEST.json; not shown",
                             file=str(self.run.path))
        t = pq.read_table(p)
        cap = (t.schema.metadata or {}).get(b"caption", b"").decode()
        df = pl.from_arrow(t)
        extra, cells = (), None
        if p.stem == "rule_attribution" and df.height:
            extra = ("example rollouts",)
            cells = [[("<td>" + " ".join(self._rlink(x) for x in attribution_examples(
                self.df, r, EXAMPLES_PER_ROW)) + "</td>")] for r in df.iter_rows(named=True)]
        if p.stem == "case_studies" and df.height:
            extra = ("pair",)
            cells = [[(f'<td>{H.link("cases.html#case-" + str(r["case"]), "side by side")}: '
                       f'{self._rlink(r["rollout_a"])} {self._rlink(r["rollout_b"])}</td>')
                      if r["rollout_a"] else "<td></td>"]
                     for r in df.iter_rows(named=True)]
        others = " ".join(H.link(f"../{rel[:-8]}.{s}", s) for s in ("csv", "md", "tex")
                          if (self.run.path / f"{rel[:-8]}.{s}").exists())
        key += p.stem  # anchors: t-<key>, table-<key>
        return (f'<h3 id="t-{key}">{p.stem}</h3><p class="hash">{rel} sha256 {digest} · '
                f"{others}</p>" + H.table(df.columns, df.iter_rows(), caption=cap, extra=extra,
                                          extra_cells=cells, table_id=f"table-{key}"))

    # ------------------------------------------------------------------ pages

    def index(self) -> None:
        from containmentbench.analysis.tables import Context

        df = self.df
        ctx = Context(df)
        defenses = sorted(set(df["defense"].to_list()))
        package = self._provenance()
        exposure = ("no rollout with untrusted content" if ctx.exposure is None else
                    f"{ctx.exposure:.3f} of {ctx.exposed_n} rollouts with untrusted content "
                    f"showed it to the model")
        body = ["<h2>Overview</h2>", H.table(["field", "value"], [
            ["study", ", ".join(sorted(set(df["study"].to_list())))],
            ["models", ", ".join(sorted(set(df["model"].to_list())))],
            ["backends", ", ".join(sorted(set(df["backend"].to_list())))],
            ["what the rows are", SIM_NOTE if ctx.sim else
             f"results of {ctx.models} only, from its own traces"],
            ["decoding", ctx.decoding_text],
            ["tool mode", ", ".join(ctx.tool_modes)],
            ["exposure", exposure],
            *([["model package", package]] if package else []),
            ["rollouts", df.height], ["defenses", ", ".join(defenses)],
            ["stages", ", ".join(s for s in STAGES if s in set(df["stage"].to_list()))],
            ["seeds", ", ".join(map(str, sorted(set(df["seed"].to_list()))))],
            ["errored rollouts (never outcomes)", int((df["status"] == "error").sum())]])]
        head = self.run.path / "tables" / "headline.parquet"
        if head.exists():
            body.append('<h2 id="headline">Headline</h2>' + self._table_html(head))
        audit = self.run.path / "tables" / "table28_integrity_audit.parquet"
        if audit.exists():
            a = pl.read_parquet(audit)
            counts = a.group_by("status").len().sort("status").rows()
            body.append("<p>Integrity and safety audit (Appendix L, Table 28): " + ", ".join(
                f'<span class="{"fail" if s == "fail" else "ok"}">{n} {s}</span>'
                for s, n in counts) + ' · ' + H.link("#t-table28_integrity_audit", "details")
                + "</p>")
        tables = [p for p in _tables(self.run) if p != head]
        body.append('<h2 id="tables">Tables</h2><nav class="toc">' + " ".join(
            H.link(f"#t-{p.stem}", p.stem) for p in tables) + "</nav>")
        body += [self._table_html(p) for p in tables]
        audit_tables = _audit_tables(self.run)
        if audit_tables:  # hashed by freeze like tables/, so checked the same way here
            body.append('<h2 id="provenance-audit">Provenance audit (paper 001)</h2><p>Offline '
                        "NeuroTaint audit of every trace (<code>containmentbench audit run</code>"
                        "): sinks with logged taint against sinks the audit attributes to an "
                        'untrusted source.</p><nav class="toc">' + " ".join(
                            H.link(f"#t-audit-{p.stem}", p.stem) for p in audit_tables) + "</nav>")
            body += [self._table_html(p, key="audit-") for p in audit_tables]
        figs = sorted((self.run.path / "figures").glob("*.png"))
        body.append('<h2 id="figures">Figures</h2>')
        for f in figs:
            body.append(f'<figure><img src="figures/{f.name}" alt="{f.stem}"><figcaption>'
                        f'{f.stem} · <span class="hash">sha256 {sha256_file(f)}</span>'
                        "</figcaption></figure>")
        body.append('<h2 id="record">Seed and version record</h2>' + self.record())
        self._emit("index.html", H.page("Study report", "".join(body), sim_note=self.note))

    def _provenance(self) -> str | None:
        """The packaged model's provenance from the run's config (models/weights.py)."""
        import yaml

        cfg = self.run.path / "config.yaml"
        if not cfg.exists():
            return None
        from containmentbench.models.weights import provenance

        path = (yaml.safe_load(cfg.read_text()) or {}).get("model", {}).get("path")
        prov = provenance(path)
        if prov is None:
            return None
        who = "a third-party repackaging" if prov["third_party"] else "the model's own release"
        dists = ", ".join(f"{k} {v}" for k, v in sorted(prov["distributions"].items()))
        return (f"{prov['path']}: {prov['model']}, GGUF '{prov['gguf_name']}', sha256 "
                f"{prov['sha256']}, {who} ({dists})")

    def record(self) -> str:
        cfg = self.run.path / "config.yaml"
        rows: list[list[Any]] = []
        if cfg.exists():
            rows.append(["config.yaml sha256", sha256_file(cfg)])
        ana = self.run.path / "analysis.json"
        if ana.exists():
            info = json.loads(ana.read_text())
            for k in ("resamples", "confidence", "seed"):
                if k in info.get("config", {}):
                    rows.append([f"analysis.{k}", info["config"][k]])
        pol = self.df.select("defense", "policy_hash", "method_version").unique().sort("defense")
        for r in pol.iter_rows(named=True):
            rows.append([f"policy {r['defense']}", f"{r['method_version']} "
                                                    f"{r['policy_hash'][:16]}"])
        ids = sorted(self.run.index)[:1]
        if ids:
            full = self.run.load(ids[0]).row
            rows.append(["parser_version", full["parser_version"]])
            rows.append([f"seed record of {ids[0]}", full["seed_record"]])
        rows.append(["study seeds", ", ".join(map(str, sorted(set(self.df["seed"].to_list()))))])
        import importlib.metadata as md

        from containmentbench.freeze.manifest import PACKAGES
        for name in PACKAGES:
            try:
                rows.append([f"package {name}", md.version(name)])
            except md.PackageNotFoundError:
                continue
        rows.append(["MANIFEST.json", "git commit and every file hash: see MANIFEST.json "
                                      "next to this report"])
        return H.table(["item", "value"], rows)

    def drilldown(self) -> None:
        df = self.df
        defenses = sorted(set(df["defense"].to_list()))
        head = ["defense", *[f"{m} [{s}]" for m, s in GRID]]
        rows = []
        for d in defenses:
            row: list[Any] = [d]
            for m, s in GRID:
                sub = stage_rows(df.filter(pl.col("defense") == d), s, m)
                row.append(float(sub[m].cast(pl.Float64).mean()) if sub.height else None)
            rows.append(row)
        cells = []
        for d in defenses:
            links = []
            for s in STAGES:
                if df.filter((pl.col("defense") == d) & (pl.col("stage") == s)).height:
                    links.append(H.link(f"drill/{d}--{s}.html", s))
                    self.cell_page(d, s)
            cells.append([f"<td>{' · '.join(links)}</td>"])
        body = H.table(head, rows, extra=["per stage"], extra_cells=cells, table_id="drill",
                       caption="Means per defense (N/A: metric not defined for any rollout). "
                               "Each stage link lists example rollouts.")
        self._emit("drilldown.html", H.page("Per-defense and per-stage drill-down", body,
                                            sim_note=self.note))

    def cell_page(self, d: str, s: str) -> None:
        sub = self.df.filter((pl.col("defense") == d) & (pl.col("stage") == s)) \
            .sort(["scenario_id", "seed"])
        cols = ["rollout_id", "scenario_id", "seed", "status", "committed_harm",
                "authorized_tainted_action_success", "clean_benign_completion",
                "blast_radius_norm", "recovery_success", "stop_rule_ids"]
        rows = sub.select(cols).rows()
        cells = [[f"<td>{self._rlink(r[0], '../') if i < EXAMPLES_PER_CELL else ''}</td>"]
                 for i, r in enumerate(rows)]
        body = H.table(cols, rows, extra=["trace page"], extra_cells=cells,
                       caption=f"Every rollout of {d} in stage {s}; the first "
                               f"{EXAMPLES_PER_CELL} have trace pages.")
        self._emit(f"drill/{d}--{s}.html", H.page(f"{d} · {s}", body, root="../",
                                                  sim_note=self.note))

    def cases(self) -> None:
        p = self.run.path / "tables" / STEPS_JSON
        if not p.exists():
            body = "<p>No case studies in this study (run <code>containmentbench cases</code>)."
            self._emit("cases.html", H.page("Case studies", body, sim_note=self.note))
            return
        data = json.loads(p.read_text())
        parts = ["<p>Matched trace pairs (paper 000 Appendix D, Table 21): same scenario, "
                 "model and seed; two defenses. Steps shown: proposal, decision, "
                 "confirmation, commit, rollback (redacted).</p>"]
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
                                 f'{self._rlink(side["rollout_id"])}</h3>' + H.table(
                                     ["seq", "kind", "tool", "target / args", "decision",
                                      "rule", "outcome"], rows,
                                     row_class=["taint" if x["tainted"] else ""
                                                for x in side["steps"]]) + "</div>")
                parts.append("</div>")
            parts.append("</section>")
        self._emit("cases.html", H.page("Case studies", "".join(parts), sim_note=self.note))

    def rollouts(self) -> None:
        for rid in progress(sorted(self.linked), "report: trace pages"):
            self._emit(f"rollouts/{rid}.html", tracepage.render(self.run.load(rid)))

    # ------------------------------------------------------------------ write

    def build(self) -> Path:
        self.index()
        self.drilldown()
        self.cases()
        self.rollouts()
        writer.clean_leftovers(self.out)  # half-written folders of killed builds (ours)
        # never deletes: a foreign folder is refused, an identical report kept, a different
        # one replaced only with force and moved aside (integrity/writer.py)
        with writer.building_dir(self.out, "report", self.force, identical=_same_tree) as b:
            for rel, text in sorted(self.files.items()):
                b.put_text(rel, text)
            for f in sorted((self.run.path / "figures").glob("*.png")):
                b.copy_in(f, f"figures/{f.name}")
        return self.out / "index.html"


def _same_tree(new: Path, old: Path) -> bool:
    def files(d: Path) -> dict[str, bytes]:
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
                if p.is_file() and not p.name.startswith(".")}
    return files(new) == files(old)


def build_report(run_dir: str | Path, out: str | Path | None = None,
                 before_freeze: bool = False, force: bool = False) -> Path:
    report = Report(run_dir, out, before_freeze)
    report.force = force
    writer.check_out(report.out, "report", force)  # before any work: nothing written on refusal
    return report.build()


_ROLLOUT_LINK = re.compile(r"rollouts/(r-[0-9a-f]+)\.html")


def linked_rollouts(index_html: Iterable[str]) -> list[str]:
    """Rollout ids linked from report pages (tests and the browser check use it)."""
    return sorted({m for t in index_html for m in _ROLLOUT_LINK.findall(t)})
