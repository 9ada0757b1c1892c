"""The integrity and safety audit of a run directory (paper 000 Appendix L, Table 28).

The paper's release check "verifies synthetic canaries, local-only email domains, absence of
forbidden payload markers in released scenarios and case studies, component-manifest
consistency, final artifact hashes, and redacted trace paths". Each is one row of the
``integrity_audit`` table: what was checked, how many items, how many violations, the first
violation (itself redacted). Final artifact hashes are checked by ``verify`` after ``freeze``
(this audit runs before, so its row says so rather than pretending).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from containmentbench.canonical import sha256_file
from containmentbench.report.cases import REDACTED, redact
from containmentbench.report.origin import MODEL_AUTHORED, Echoes, benchmark_part
from containmentbench.report.rundir import RunDir
from containmentbench.scenarios.manifest import MANIFEST, read_manifest, suite_dir
from containmentbench.trace.io import verify_shard

CANARY = re.compile(r"CB-CANARY-[0-9A-F]{10}\b")
CANARY_LIKE = re.compile(r"(?i)\b(?:canary|api[_-]?key|secret[_-]?key|password)\s*[:=]\s*(\S+)")
# An e-mail's domain, as r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)" finds it, in linear time: that
# pattern tried every start of a long word and scanned it to its end looking for '@'
# (quadratic: one 40 KB token took 30 s). Here the engine jumps to each '@' and looks one
# character back for the local part; :func:`email_domains` drops the one case the old
# pattern did not match (an '@' right after the previous match). bench/regex_worst_case.py.
EMAIL_AT = re.compile(r"@(?<=[\w.+-]@)([\w-]+(?:\.[\w-]+)+)")
# RFC 2606 / 6761 reserved names: nothing addressed to them can leave the machine
LOCAL_TLDS = (".local", ".test", ".example", ".invalid", ".localhost")
URL = re.compile(r"(?i)\b(?:https?|ftp)://([^/\s\"']+)")
# stealth, obfuscation and encoding-bypass markers excluded from the release (Appendix L)
FORBIDDEN = {
    "zero-width character": re.compile("[\u200b-\u200f\u2060\ufeff]"),
    "bidi control": re.compile("[\u202a-\u202e\u2066-\u2069]"),
    "unicode tag character": re.compile("[\U000e0000-\U000e007f]"),
    "base64 blob": re.compile(r"(?<![\w/+])[A-Za-z0-9+/]{60,}={0,2}(?![\w/+])"),
    "script or javascript: payload": re.compile(r"(?i)<script\b|javascript:"),
    "html comment": re.compile(r"<!--"),
}
_EVENT_TEXT = ["rollout_id", "kind", "target", "args", "text", "evidence"]
_EVENT_COLS = [*_EVENT_TEXT, "tool", "origin"]  # who wrote it (report/origin.py)


def email_domains(text: str) -> list[str]:
    """The domain of every e-mail address in ``text`` (what ``findall`` of the old pattern
    gave: non-overlapping, left to right)."""
    out, end = [], -1
    for m in EMAIL_AT.finditer(text):
        if m.start() != end:  # else its local part would be the previous match's domain
            out.append(m.group(1))
            end = m.end()
    return out


def _domain_local(domain: str) -> bool:
    d = domain.lower().rstrip(".")
    return d.endswith(LOCAL_TLDS) or d in ("localhost",)


def _scenario_texts(suite: str) -> Iterator[tuple[str, str]]:
    d = suite_dir(suite)
    for p in sorted(d.glob("*.jsonl")):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            yield f"scenarios/{suite}/{p.name}:{i}", line


def _nothing_said() -> tuple[str, ...]:
    return ()


Where = str | tuple[str, ...]  # a place, or its parts to be joined with ':' when named


def _trace_texts(run: RunDir) -> Iterator[tuple[Where, str, str, Callable[[], tuple[str, ...]]]]:
    """(where, text, kind, what the model had written before it in its rollout) for every
    text column of every event, one shard at a time. The place is named only for a
    violation, so it comes as its parts (shard, rollout, column). The last item is a
    function: the model's strings are gathered only for a text that has a hit (few do), and
    it must be called before the next item is taken (it reads the rollout's events fed so
    far)."""
    for shard in run.shards:
        rel = shard.relative_to(run.path).as_posix()
        echoes = Echoes()
        t = pq.read_table(shard / "events.parquet", columns=_EVENT_COLS).to_pylist()
        for r in t:
            said = _nothing_said if r["kind"] in MODEL_AUTHORED else \
                partial(echoes.said, r["rollout_id"])
            for col in _EVENT_TEXT[2:]:
                if r[col]:
                    yield (rel, r["rollout_id"], col), r[col], r["kind"], said
            echoes.feed(r)


def _row(check: str, scope: str, items: int, bad: list[str], note: str = "",
         violations: int | None = None) -> dict[str, Any]:
    n_bad = len(bad) if violations is None else violations
    return {"check": check, "scope": scope, "items_checked": items, "violations": n_bad,
            "status": "pass" if not n_bad else "fail",
            "first_violation": redact(bad[0])[:200] if bad else None, "note": note}


class _Scan:
    """Texts through ``find`` (a pure function of the text). A text repeated across defenses
    and seeds (most trace texts are) is searched once, and only the count and the first
    violation are kept (all the table reports), so the traces are streamed shard by shard.

    A trace text is checked for what the benchmark wrote in it (report/origin.py): a hit in
    an event the model wrote, or in what the runtime echoed of it, is an outcome, counted
    in ``model_hits`` and never a violation."""

    def __init__(self, find: Callable[[str], list[str]]) -> None:
        self.find = find
        self.memo: dict[str, list[str]] = {}
        self.n = self.count = self.model_hits = 0
        self.first: list[str] = []

    def _hits(self, text: str) -> list[str]:
        hits = self.memo.get(text)
        if hits is None:
            hits = self.memo[text] = self.find(text)
        return hits

    def add(self, where: Where, text: str, kind: str | None = None,
            said: Callable[[], tuple[str, ...]] = _nothing_said) -> None:
        self.n += 1
        hits = self._hits(text)
        if hits and kind is not None:  # a trace text: only what the benchmark wrote counts
            if kind in MODEL_AUTHORED:
                own = []
            else:
                earlier = said()
                own = self._hits(benchmark_part(text, earlier)) if earlier else hits
            self.model_hits += max(0, len(hits) - len(own))
            hits = own
        if hits:
            if not self.first:
                place = where if isinstance(where, str) else ":".join(where)
                self.first.append(f"{place}: {hits[0]}")
            self.count += len(hits)

    def feed(self, texts: Iterable[tuple[str, str]]) -> _Scan:
        for where, text in texts:
            self.add(where, text)
        return self

    def note(self, text: str) -> str:
        if not self.model_hits:
            return text
        return (f"{text}; {self.model_hits} match(es) in model-written text or its runtime "
                "echoes set aside")


def audit(run: RunDir, cases: pl.DataFrame | None = None,
          case_steps: list[dict[str, Any]] | None = None) -> pl.DataFrame:
    rows_meta = pq.read_table(run.shards[0] / "rollouts.parquet", columns=["suite"]).to_pylist()
    suites = sorted({r["suite"] for s in run.shards for r in
                     pq.read_table(s / "rollouts.parquet", columns=["suite"]).to_pylist()}
                    or {r["suite"] for r in rows_meta})
    scen = [t for s in suites for t in _scenario_texts(s)]
    released = [("case_studies.json", json.dumps(case_steps, sort_keys=True))] \
        if case_steps is not None else []

    def nonlocal_(t: str) -> list[str]:
        return [d for d in email_domains(t) + URL.findall(t)
                if not _domain_local(d.split(":")[0])]

    def markers(t: str) -> list[str]:
        return [name for name, rx in FORBIDDEN.items() if rx.search(t)]

    canaries = _Scan(lambda t: [v for v in CANARY_LIKE.findall(t) if not CANARY.match(v)])
    domains = _Scan(nonlocal_)
    paths = _Scan(lambda t: [] if redact(t) == t else [REDACTED])
    canaries.feed(scen)
    domains.feed(scen)
    for where, text, kind, said in _trace_texts(run):  # one pass, one shard at a time
        canaries.add(where, text, kind, said)
        if kind not in MODEL_AUTHORED:
            domains.add(where, text, kind, said)
        paths.add(where, text, kind, said)
    paths.feed(released)
    out = []

    # 1. synthetic canaries: every declared canary is a CB-CANARY token; nothing that looks
    # like a credential carries another value
    n, bad = 0, []
    for where, line in scen:
        rec = json.loads(line)
        for c in rec.get("canaries") or []:
            n += 1
            if not CANARY.fullmatch(c["token"]):
                bad.append(f"{where}: canary {c['token']!r} is not a synthetic CB-CANARY token")
    out.append(_row("synthetic canaries", "scenarios, traces", n + canaries.n,
                    bad + canaries.first, canaries.note("canaries match CB-CANARY-<10 hex>"),
                    violations=len(bad) + canaries.count))

    # 2. local-only recipients: every e-mail domain and URL host the benchmark writes
    # (scenarios, and the environment's side of the traces) is reserved-local. Model-written
    # text is excluded: what a model addresses is a measured outcome, never delivered.
    out.append(_row("local-only domains", "scenarios, environment trace events", domains.n,
                    domains.first, domains.note("domains end in " + ", ".join(LOCAL_TLDS)
                                                + "; model-written text is an outcome and is "
                                                "not checked"),
                    violations=domains.count))

    # 3. no forbidden payload markers in released scenarios and case studies
    marks = _Scan(markers).feed(scen + released)
    out.append(_row("no forbidden payload markers", "scenarios, case studies", marks.n,
                    marks.first, "; ".join(FORBIDDEN), violations=marks.count))

    # 4. redacted trace paths: no absolute host path in any trace text or case study
    out.append(_row("redacted trace paths", "traces, case studies", paths.n, paths.first,
                    paths.note("absolute host paths are replaced by " + REDACTED),
                    violations=paths.count))

    # 5. component-manifest consistency: scenario manifests and shard checksums
    n, bad = 0, []
    for s in suites:
        d = suite_dir(s)
        m_ = read_manifest(d)
        for stage, info in m_["stages"].items():
            n += 1
            if sha256_file(d / f"{stage}.jsonl") != info["sha256"]:
                bad.append(f"scenarios/{s}/{stage}.jsonl differs from {MANIFEST}")
        hashes = m_.get("scenarios", {})
        for shard in run.shards:
            for r in pq.read_table(shard / "rollouts.parquet",
                                   columns=["scenario_id", "scenario_hash"]).to_pylist():
                n += 1
                if hashes and hashes.get(r["scenario_id"]) != r["scenario_hash"]:
                    bad.append(f"{r['scenario_id']}: trace scenario_hash differs from {MANIFEST}")
    for shard in run.shards:
        n += 1
        bad += [f"{Path(b).name}: differs from SHA256SUMS" for b in verify_shard(shard)]
    out.append(_row("component-manifest consistency", "scenario manifests, shard checksums",
                    n, bad))

    # 6. case studies link representative examples that exist in the traces
    if cases is not None:
        ids = [x for col in ("rollout_a", "rollout_b") for x in cases[col].to_list() if x]
        bad = [f"{x}: not in traces" for x in ids if not run.has(x)]
        out.append(_row("case studies link traces", "case_studies", len(ids), bad))

    out.append({"check": "final artifact hashes", "scope": "MANIFEST.json", "items_checked": 0,
                "violations": 0, "status": "deferred",
                "first_violation": None,
                "note": "checked by `containmentbench verify` after freeze"})
    return pl.DataFrame(out, schema={"check": pl.String, "scope": pl.String,
                                     "items_checked": pl.Int64, "violations": pl.Int64,
                                     "status": pl.String, "first_violation": pl.String,
                                     "note": pl.String})
