"""The static HTML report of a run directory (``containmentbench report``).

Layout (deterministic bytes: sorted, no timestamps, so the report is hashed by ``freeze``
and a rebuild of a frozen study reproduces it)::

    report/index.html            the headline (question, operating-point figure, findings
                                 per defense, sentences from the numbers), then the tables in
                                 paper order with their figures beside them, the provenance
                                 audit's tables (audit/tables/, when the run has one), record
    report/rollouts.html         every rollout: filter and sort (a JSON block + one script)
    report/drilldown.html        defense x stage grid -> the rollout index, filtered
    report/cases.html            Table 21 pairs side by side (proposal, decision, commit)
    report/rollouts/<id>.html    a trace page for every rollout with a committed policy
                                 violation, a provider error, a case-study role or a link
                                 from a table, and for a contained rollout of every
                                 defense x carrier x goal cell (the story first:
                                 ``story.py``; graph, timeline, metric values, CIM view);
                                 ``report --serve`` makes any other one on demand
    report/figures/*.png         copies of the study's figures
    report/glossary.html         every metric's key, display name, definition, equation
                                 and denominator (``metrics/glossary.py``); every table
                                 header naming a metric links to its entry
    report/tables/*, report/figures/*_source.*, report/audit/tables/*
                                 byte-identical copies of every data file a page links to
                                 (a table's Parquet, CSV, Markdown and LaTeX, the results
                                 table, the headline as text), each checked against the
                                 manifest like a shown table: every link of every page
                                 resolves inside the report folder, so the report works
                                 opened from ``file://``, served by ``report --serve``,
                                 written elsewhere with ``--out`` and inside the
                                 ``snakemake --report`` archive

A frozen study (one with MANIFEST.json) must pass ``verify`` and every table's sha256 must
equal its manifest entry (``audit/tables/`` and ``tables/headline.json`` included), or
nothing is written. Inside the pipeline the report is built just after ``audit`` and just
before ``freeze`` (``before_freeze``), which then hashes it with everything else.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.paired import PAIR_KEYS, stage_rows
from containmentbench.analysis.tables import SIM_NOTE, Context
from containmentbench.analysis.writers import read
from containmentbench.canonical import sha256_file
from containmentbench.errors import BenchError
from containmentbench.integrity import frozen, reading, safeopen, writer
from containmentbench.progress import progress
from containmentbench.report import headline as HL
from containmentbench.report import html as H
from containmentbench.report import pages, rollindex, sections, tracepage
from containmentbench.report.rundir import RunDir
from containmentbench.report.write import STEPS_JSON

EXAMPLES_PER_ROW = 3
HEADLINE_FIGURE = "headline_operating_points"
#: fewer trace pages than this are rendered in one process (a spawned one costs ~1 s)
PARALLEL_PAGES = 200


def rollout_href(rid: str, root: str = "") -> str:
    return f"{root}rollouts/{rid}.html"


def check_frozen(run: RunDir) -> dict[str, str]:
    """The manifest's files of a frozen study that passes ``verify`` (its MAC with a key;
    a missing manifest of a frozen study, an empty list of files: refused)."""
    from containmentbench.freeze.manifest import verify
    from containmentbench.integrity.keys import load_key

    key = load_key(run.path)
    man = reading.checked(run.path, key, require_manifest=True)
    if man is None:
        raise BenchError("no MANIFEST.json: the study is not frozen (run freeze first)",
                         file=str(run.path))
    problems = verify(run.path, key)
    if problems:
        raise BenchError(f"study fails verify ({len(problems)} mismatch(es); first: "
                         f"{problems[0]}); no report written", file=str(run.path))
    return man[0]["files"]


def _tables(run: RunDir) -> list[Path]:
    """Every table of the study except the headline's own and the results table (shown in
    the first screen, and data rather than a table to read)."""
    skip = {"findings", "results"}
    return [p for p in sorted((run.path / "tables").glob("*.parquet")) if p.stem not in skip]


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


def contained_examples(df: pl.DataFrame) -> set[str]:
    """One contained rollout per defense x carrier x attack goal cell (an attack placed, no
    violation committed, eq. 5): the first by (scenario, seed) whose ``contained_by`` names
    a layer, else the first the agent left undone (``no_layer``), so the report shows
    containment as well as failures."""
    need = {"attack_goal", "carrier", "contained_by", "committed_harm", "status"}
    if not need <= set(df.columns):
        return set()
    ok = df.filter(pl.col("attack_goal").is_not_null() & (pl.col("status") != "error")
                   & (pl.col("committed_harm") == 0))
    ok = ok.with_columns(pl.col("contained_by").is_in(["no_layer", "not_contained"])
                         .fill_null(True).alias("_by_agent"))
    first = ok.sort(["_by_agent", "scenario_id", "seed", "rollout_id"]).group_by(
        ["defense", "carrier", "attack_goal"], maintain_order=True).first()
    return set(first["rollout_id"].to_list())


def page_rollouts(df: pl.DataFrame, run: Path) -> set[str]:
    """Rollouts that get a static trace page: every committed policy violation (eq. 5), every
    provider error, every case-study rollout and a contained rollout of every defense x
    carrier x goal cell (links from tables are added as they are made)."""
    hit = df.filter((pl.col("committed_harm") == 1) | (pl.col("status") == "error"))
    return (set(hit["rollout_id"].to_list()) | pages.case_rollouts(run)
            | contained_examples(df))


def trace_pages(run: RunDir, ids: list[str],
                metrics: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(report path, HTML) of the trace page of each rollout in ``ids``."""
    for r in run.load_many(ids):
        yield rollout_href(r.id), tracepage.render(r, metrics=metrics.get(r.id))


def render_pages(run_dir: str, ids: list[str],
                 metrics: dict[str, dict[str, Any]]) -> dict[str, str]:
    """:func:`trace_pages` in a spawned process (a process forked from one running polars'
    thread pool can deadlock), so it reads the traces itself."""
    return dict(trace_pages(RunDir(run_dir), ids, metrics))


class Report:
    workers = 1  # processes for the trace pages (``report --workers``)

    def __init__(self, run_dir: str | Path, out: str | Path | None = None,
                 before_freeze: bool = False) -> None:
        self.run = RunDir(run_dir)
        self.out = Path(out) if out else self.run.path / "report"
        self.force = False
        self.hashes = None if before_freeze else check_frozen(self.run)
        # before freeze, in a study frozen earlier: every shown file is the frozen one or a
        # verb's rebuilt output on the study's chain (integrity/reading.trusted)
        self.trust = before_freeze and frozen.root_of(self.run.path) is not None
        mp = self.run.path / "metrics" / "rollout_metrics.parquet"
        if not mp.exists():
            raise BenchError("no metrics/rollout_metrics.parquet (run metrics first)",
                             file=str(self.run.path))
        self.df = pl.read_parquet(mp)
        self.ctx = Context(self.df)
        self.sim = self.ctx.sim
        self.note = SIM_NOTE if self.sim else None
        self.pages = page_rollouts(self.df, self.run.path)
        self.files: dict[str, str] = {}
        #: report path -> bytes of a data file a page links to (copied in, byte-identical)
        self.copies: dict[str, bytes] = {}

    # ------------------------------------------------------------------ helpers

    def _emit(self, rel: str, text: str) -> None:
        self.files[rel] = text

    def _rlink(self, rid: str, root: str = "") -> str:
        self.pages.add(rid)
        return H.link(rollout_href(rid, root), rid, "rollout-link")

    def _checked(self, p: Path) -> str:
        """sha256 of a shown file, equal to its manifest entry on a frozen study."""
        rel = p.relative_to(self.run.path).as_posix()
        if self.trust:
            reading.trusted(p)
        digest = sha256_file(p)
        if self.hashes is not None and self.hashes.get(rel) != digest:
            raise BenchError(f"{rel}: sha256 differs from MANIFEST.json; not shown",
                             file=str(self.run.path))
        return digest

    def _data_link(self, p: Path, label: str, root: str = "") -> str:
        """A link to a copy of the study file ``p`` inside the report, at the same relative
        path (``tables/x.csv`` -> ``report/tables/x.csv``). The bytes copied are the bytes
        checked: read once, their sha256 compared with the manifest on a frozen study."""
        rel = p.relative_to(self.run.path).as_posix()
        if rel not in self.copies:
            self.copies[rel] = self._checked_bytes(p, "not linked")
        return H.link(f"{root}{rel}", label)

    def _checked_bytes(self, p: Path, refused: str) -> bytes:
        """The bytes of the study file ``p``, read once (through the safe open) and, on a
        frozen study, equal to its manifest entry: what is shown or copied is what was
        checked."""
        rel = p.relative_to(self.run.path).as_posix()
        if self.trust:
            reading.trusted(p)
        data = safeopen.read_bytes(p, limit=safeopen.LIMIT_JSON, what="study file",
                                   follow=False)
        if self.hashes is not None and self.hashes.get(rel) != hashlib.sha256(data).hexdigest():
            raise BenchError(f"{rel}: sha256 differs from MANIFEST.json; {refused}",
                             file=str(self.run.path))
        return data

    def _table_html(self, p: Path, key: str = "") -> str:
        rel = p.relative_to(self.run.path).as_posix()
        digest = self._checked(p)
        table = read(p)
        cap, df = table.caption, table.frame
        df = df.select(H.metric_first(df.columns))  # exclusion counters after the metrics
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
        others = " ".join(self._data_link(p.with_suffix(f".{s}"), s)
                          for s in ("parquet", "csv", "md", "tex")
                          if p.with_suffix(f".{s}").exists())
        key += p.stem  # anchors: t-<key>, table-<key>
        return (f'<p class="hash">{rel} sha256 {digest} · {others}</p><div class="tbox">'
                + H.table(df.columns, df.iter_rows(), caption=cap, extra=extra,
                          extra_cells=cells, table_id=f"table-{key}") + "</div>")

    def _figure(self, f: Path) -> str:
        src = self.run.path / "figures" / f"{f.stem.split('_')[0]}_source.parquet"
        fold = ""
        if src.exists():
            fold = (f"<details><summary>source data of {H.escape(f.stem)}</summary>"
                    + self._table_html(src) + "</details>")
        return (f'<figure><img src="figures/{H.escape(f.name)}" alt="{H.escape(f.stem)}">'
                f'<figcaption>{H.escape(f.stem)} · <span class="hash">sha256 '
                f"{self._checked(f)}</span></figcaption>{fold}</figure>")

    def _section(self, p: Path, figs: list[Path], key: str = "") -> str:
        title = f'<h3 id="t-{key}{p.stem}">{H.escape(sections.title(p.stem))}</h3>'
        table = self._table_html(p, key)
        if p.stem in sections.FOLDED:
            table = f"<details><summary>show the table</summary>{table}</details>"
        if figs:
            return (f'{title}<div class="pairfig"><div>{table}</div><div>'
                    + "".join(self._figure(f) for f in figs) + "</div></div>")
        return title + table

    # ------------------------------------------------------------------ pages

    def headline(self) -> str:
        p = self.run.path / "tables" / "headline.json"
        if not p.exists():  # an older study, or one whose analysis wrote none
            return "<p>No headline in this study (rerun <code>analyze</code>).</p>"
        self._checked(p)
        doc = json.loads(p.read_text())
        fig = self.run.path / "figures" / f"{HEADLINE_FIGURE}.png"
        tables = self.run.path / "tables"
        data = [self._data_link(tables / name, label) for name, label in (
            ("results.parquet", "all numbers as data (tables/results.parquet)"),
            ("headline.md", "this headline as text")) if (tables / name).exists()]
        links = ('<p class="small">'
                 + " · ".join([H.link("rollouts.html", "every rollout (filter, sort)"), *data,
                               H.link("glossary.html", "what each metric means"),
                               H.link("#overview", "what the rows are")]) + "</p>")
        return HL.section(doc, figure=f"figures/{fig.name}" if fig.exists() else None,
                          links=links)

    def index(self) -> None:
        body = [self.headline()]
        audit = self.run.path / "tables" / "table28_integrity_audit.parquet"
        if audit.exists():
            a = pl.read_parquet(audit)
            counts = a.group_by("status").len().sort("status").rows()
            body.append("<p>Integrity and safety audit (Appendix L, Table 28): " + ", ".join(
                f'<span class="{"fail" if s == "fail" else "ok"}">{n} {s}</span>'
                for s, n in counts) + " · " + H.link("#t-table28_integrity_audit", "details")
                + "</p>")
        body.append('<h2 id="overview">What the rows are</h2>'
                    + pages.overview(self.run.path, self.df))
        tables = sections.ordered(_tables(self.run))
        figs = [f for f in sorted((self.run.path / "figures").glob("*.png"))
                if f.stem != HEADLINE_FIGURE]
        beside, alone = sections.figures_beside(figs, tables)
        body.append('<h2 id="tables">Tables</h2><nav class="toc">' + " ".join(
            H.link(f"#t-{p.stem}", sections.title(p.stem)) for p in tables) + "</nav>")
        body += [self._section(p, beside.get(p.stem, [])) for p in tables]
        audit_tables = _audit_tables(self.run)
        if audit_tables:  # hashed by freeze like tables/, so checked the same way here
            body.append('<h2 id="provenance-audit">Provenance audit (paper 001)</h2><p>Offline '
                        "NeuroTaint audit of every trace (<code>containmentbench audit run</code>"
                        "): sinks with logged taint against sinks the audit attributes to an "
                        'untrusted source.</p><nav class="toc">' + " ".join(
                            H.link(f"#t-audit-{p.stem}", p.stem) for p in audit_tables) + "</nav>")
            body += [self._section(p, [], key="audit-") for p in audit_tables]
        if alone:
            body.append('<h2 id="figures">Other figures</h2>'
                        + "".join(self._figure(f) for f in alone))
        body.append('<h2 id="record">Seed and version record</h2>'
                    + pages.record(self.run, self.df))
        self._emit("index.html", H.page(f"Study report: {self.ctx.study}, model "
                                        f"{self.ctx.models}", "".join(body),
                                        sim_note=self.note))

    def rollout_index(self) -> None:
        data = rollindex.index_data(self.df, self.pages, self.ctx.defenses)
        self._emit("rollouts.html", H.page(
            f"Rollouts: {self.ctx.study}, model {self.ctx.models}", rollindex.body(data),
            sim_note=self.note, scripts=[rollindex.SCRIPT],
            data=H.json_block("rollout-data", data)))

    def glossary(self) -> None:
        self._emit("glossary.html", H.page("Glossary: what each number means",
                                           pages.glossary(), sim_note=self.note))

    def drilldown(self) -> None:
        p = self.run.path / "tables" / "headline.json"
        findings = []
        if p.exists():
            findings = json.loads(self._checked_bytes(p, "not shown"))["findings"]
        self._emit("drilldown.html", H.page("Per-defense and per-stage drill-down",
                                            pages.drilldown(self.df, self.ctx.defenses,
                                                            findings),
                                            sim_note=self.note))

    def cases(self) -> None:
        self._emit("cases.html", H.page("Case studies", pages.cases(
            self.run.path / "tables" / STEPS_JSON, self._rlink), sim_note=self.note))

    def _metrics_of(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return {r["rollout_id"]: r for r in self.df.filter(
            pl.col("rollout_id").is_in(ids)).iter_rows(named=True)}

    def _start_pages(self, pool: ProcessPoolExecutor) -> tuple[Future, set[str]]:
        """A spawned process renders the later half of the pages known before the index is
        built (the violations, errors and case-study rollouts), while this one builds the
        index pages and then the rest; the bytes are the same."""
        part = sorted(self.pages)[len(self.pages) // 2:]
        return pool.submit(render_pages, str(self.run.path), part,
                           self._metrics_of(part)), set(part)

    def rollouts(self, elsewhere: set[str] = frozenset()) -> None:
        ids = sorted(self.pages - elsewhere)
        for rel, html in progress(trace_pages(self.run, ids, self._metrics_of(ids)),
                                  "report: trace pages", total=len(ids)):
            self._emit(rel, html)

    # ------------------------------------------------------------------ write

    def build(self) -> Path:
        pool = (ProcessPoolExecutor(1, mp_context=get_context("spawn"))
                if self.workers > 1 and len(self.pages) >= PARALLEL_PAGES else None)
        try:
            other, elsewhere = self._start_pages(pool) if pool else (None, set())
            self.index()  # links from tables add pages; the index and the pages come after
            self.drilldown()
            self.glossary()
            self.cases()
            self.rollout_index()
            self.rollouts(elsewhere)
            if other is not None:
                self.files.update(other.result())
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        writer.clean_leftovers(self.out)  # half-written folders of killed builds (ours)
        # never deletes: a foreign folder is refused, an identical report kept, a different
        # one replaced only with force and moved aside (integrity/writer.py)
        with writer.building_dir(self.out, "report", self.force, identical=_same_tree) as b:
            for rel, text in sorted(self.files.items()):
                b.put_text(rel, text)
            for f in sorted((self.run.path / "figures").glob("*.png")):
                b.copy_in(f, f"figures/{f.name}")
            for rel, data in sorted(self.copies.items()):
                b.put(rel, data)
        return self.out / "index.html"


def _same_tree(new: Path, old: Path) -> bool:
    def files(d: Path) -> dict[str, bytes]:
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
                if p.is_file() and not p.name.startswith(".")}
    return files(new) == files(old)


def build_report(run_dir: str | Path, out: str | Path | None = None,
                 before_freeze: bool = False, force: bool = False, workers: int = 1) -> Path:
    report = Report(run_dir, out, before_freeze)
    report.force = force
    report.workers = workers
    writer.check_out(report.out, "report", force)  # before any work: nothing written on refusal
    return report.build()


_ROLLOUT_LINK = re.compile(r"rollouts/(r-[0-9a-f]+)\.html")


def linked_rollouts(index_html: Iterable[str]) -> list[str]:
    """Rollout ids linked from report pages (tests and the browser check use it)."""
    return sorted({m for t in index_html for m in _ROLLOUT_LINK.findall(t)})
