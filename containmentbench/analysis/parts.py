"""The two expensive halves of ``analyze``, each cached in its own file (design card:
sensitivity and bootstrap are their own rules).

* ``sensitivity``: the deterministic sensitivity analyses of §7.2 — stage contribution of the
  spread gap (Table 13), realized vs fixed-max denominators (Table 14), rule attribution.
* ``bootstrap``: every resampled interval — the configured and sweep paired comparisons
  (eq. 12, Tables 12 and 25) and the trajectory-divergence intervals (Table 10).

Each part is written as canonical JSON (floats in shortest round-trip form, so a read-back
part gives the same tables bytes as a fresh computation) together with the sha256 of the
metrics file and the config keys it read; ``analyze`` refuses a part computed from other
metrics or settings. :func:`settings_digest` gives the Snakemake rules a parameter that
changes exactly when a part's settings change, so a bootstrap setting never reruns
``sensitivity`` and vice versa.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from containmentbench.analysis.bootstrap import Interval
from containmentbench.analysis.outputs import plain, settings_of
from containmentbench.analysis.paired import (
    Comparison,
    Settings,
    attribution,
    divergence_draws,
    divergence_finish,
    sensitivity,
    stage_contribution,
)
from containmentbench.analysis.parallel import IntervalPool, pool_for, submit_many
from containmentbench.analysis.seeds import interval_rows
from containmentbench.canonical import sha256_file
from containmentbench.errors import BenchError
from containmentbench.integrity import reading, writer
from containmentbench.progress import Progress

STAGES = ("security", "memory_recovery", "active_tainted", "clean")

# bumped whenever the part layout changes; an older file is refused, not misread
# (2: comparisons carry n_seeds and distinct_traces; 3: Tables 13-14 frames carry the
# rollouts each row leaves out, analysis/exclusions.py)
FORMAT = 3
_DTYPES = {"String": pl.String, "Int64": pl.Int64, "Float64": pl.Float64,
           "Boolean": pl.Boolean, "Int32": pl.Int32}


def _have(df: pl.DataFrame | set[str], *defenses: str) -> bool:
    """All ``defenses`` present in the frame (or in its set of defenses, computed once by
    the caller: ~100 checks per analysis, each a pass over up to 10^6 rows otherwise)."""
    present = df if isinstance(df, set) else set(df["defense"].unique().to_list())
    return all(d in present for d in defenses)


# ---------------------------------------------------------------- frames <-> JSON


def _frame_doc(f: pl.DataFrame) -> dict[str, Any]:
    # a list of [name, dtype] pairs: the part is written with sorted keys, columns keep order
    return {"columns": [[c, str(t)] for c, t in f.schema.items()], "rows": f.rows()}


def _frame(doc: Mapping[str, Any]) -> pl.DataFrame:
    schema = {c: _DTYPES[t] for c, t in doc["columns"]}
    return pl.DataFrame(doc["rows"], schema=schema, orient="row")


def _comparison_doc(c: Comparison | None) -> dict[str, Any] | None:
    return None if c is None else asdict(c)


def _comparison(d: Mapping[str, Any] | None) -> Comparison | None:
    if d is None:
        return None
    iv = {k: Interval(**d[k]) if d[k] is not None else None for k in ("pair", "cluster")}
    return Comparison(**{**d, **iv})


# ---------------------------------------------------------------- the two parts


def sensitivity_part(df: pl.DataFrame, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Tables 13 and 14 and rule attribution, as frames (None when a defense is absent)."""
    sc, se = cfg["stage_contribution"], cfg["sensitivity"]
    present = set(df["defense"].unique().to_list())
    contrib = stage_contribution(df, sc["a"], sc["b"], sc["metric"], STAGES) \
        if _have(present, sc["a"], sc["b"]) else None
    sens = sensitivity(df, se["a"], se["b"]) if _have(present, se["a"], se["b"]) else None
    attr = [attribution(df, a["a"], a["b"], a["metric"], a["stage"])
            for a in cfg["attribution"] if _have(present, a["a"], a["b"])]
    return {"stage_contribution": contrib, "sensitivity": sens,
            "attribution": pl.concat(attr) if attr else None}


def bootstrap_part(df: pl.DataFrame, cfg: Mapping[str, Any], defenses: list[str],
                   workers: int | None = None) -> dict[str, Any]:
    """Every resampled interval: configured comparisons (with their claim flag), the sweep
    against the baseline over ``defenses`` (table order), divergence intervals. Intervals
    are resampled on ``workers`` processes (analysis.parallel: identical for any count)."""
    n = len(cfg["comparisons"]) + len(cfg["sweep"]["metrics"]) * len(defenses)
    with pool_for(df, n, int(cfg["resamples"]), workers) as pool:
        return start_bootstrap(df, cfg, defenses, pool)()


def start_bootstrap(df: pl.DataFrame, cfg: Mapping[str, Any], defenses: list[str],
                    pool: IntervalPool) -> Callable[[], dict[str, Any]]:
    """:func:`bootstrap_part` in two steps: build every interval's inputs and submit them
    to ``pool`` now; the returned function waits for them and assembles the part, so the
    caller can compute other tables while the workers resample."""
    s = Settings.from_config(cfg)
    df = interval_rows(df)  # one seed when the study declared its seeds copies
    skipped: list[str] = []
    base = cfg["sweep"]["baseline"]
    specs = [(spec, bool(spec.get("claim"))) for spec in cfg["comparisons"]]
    n_configured = len(specs)
    specs += [({"a": base, "b": d, "metric": m["metric"], "stage": m["stage"]}, False)
              for d in defenses if d != base for m in cfg["sweep"]["metrics"]]
    bar = Progress(len(specs) + len(cfg["divergence"]), "bootstrap: comparisons",
                   unit="comparison")
    have = set(df["defense"].unique().to_list())
    present = []
    for spec, _ in specs:
        if _have(have, spec["a"], spec["b"]):
            present.append(spec)
        else:
            skipped.append(f"{spec['a']} vs {spec['b']} ({spec.get('metric', 'divergence')})")
    compared = submit_many(df, present, s, pool)
    div_jobs = []
    for spec in cfg["divergence"]:
        if _have(have, spec["a"], spec["b"]):
            row, interval = divergence_draws(df, spec["a"], spec["b"], spec["stage"], s)
            div_jobs.append((row, pool.submit(interval) if interval is not None else None))
        else:
            skipped.append(f"divergence {spec['a']} vs {spec['b']}")

    def collect() -> dict[str, Any]:
        done = iter(compared())
        bar.update(len(specs))
        results = [(claim, next(done) if _have(have, spec["a"], spec["b"]) else None)
                   for spec, claim in specs]
        n_intervals = sum(2 * (c.n_pairs > 0) for _, c in results if c is not None)
        configured = results[:n_configured]
        sweep = [c for _, c in results[n_configured:] if c is not None]
        div = []
        for row, ci in div_jobs:
            bar.update()
            div.append(divergence_finish(row, ci.result() if ci is not None else None))
            n_intervals += 1
        bar.close()
        return {"configured": configured, "sweep": sweep, "divergence": div,
                "skipped": skipped, "intervals": n_intervals, "resamples": s.resamples}

    return collect


# ---------------------------------------------------------------- files


def read_frame(metrics_path: str | Path) -> pl.DataFrame:
    """The metrics table as one polars frame, read by polars' own Parquet reader: the same
    frame as ``pl.from_arrow(read_metrics(path))`` (same columns, dtypes, values, one chunk)
    without holding an Arrow copy beside it (10^6 rows: 0.56 GiB peak instead of 1.0 GiB,
    and several times faster). Refuses a file without the metrics schema's columns, like
    ``read_metrics``."""
    from containmentbench.metrics.schema import check_metrics_file

    path = Path(metrics_path)
    check_metrics_file(path)
    return pl.read_parquet(path).rechunk()




def write_part(part: str, data: Mapping[str, Any], metrics: str | Path,
               cfg: Mapping[str, Any], out: str | Path) -> None:
    if part == "sensitivity":
        body = {k: _frame_doc(v) if v is not None else None for k, v in data.items()}
    else:
        body = {"configured": [[claim, _comparison_doc(c)] for claim, c in data["configured"]],
                "sweep": [_comparison_doc(c) for c in data["sweep"]],
                "divergence": data["divergence"], "skipped": data["skipped"],
                "intervals": data["intervals"], "resamples": data["resamples"]}
    doc = {"part": part, "format": FORMAT, "metrics_sha256": sha256_file(Path(metrics)),
           "settings": plain(settings_of(cfg, part)), "data": body}
    writer.write_json(Path(out), doc, kind=part, indent=None)


def read_part(part: str, path: str | Path, metrics: str | Path,
              cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A cached part, refused (one line naming the file) if it was computed from other
    metrics or other settings than the ones ``analyze`` is about to use."""
    from containmentbench.integrity.inputs import load_json

    path = Path(path)
    reading.trusted(path)  # in a frozen study: the frozen or a verb-rebuilt cache, never an edit
    doc = load_json(path, "analysis_part")
    if doc.get("part") != part:
        raise BenchError(f"holds part '{doc.get('part')}', expected '{part}'", file=str(path))
    if doc.get("format") != FORMAT:
        raise BenchError(f"{part} part has format {doc.get('format')}, expected {FORMAT} "
                         f"(written by another version; recompute it)", file=str(path),
                         field="format")
    if doc["metrics_sha256"] != sha256_file(Path(metrics)):
        raise BenchError(f"{part} part was computed from other metrics than {metrics}",
                         file=str(path), field="metrics_sha256")
    if doc["settings"] != plain(settings_of(cfg, part)):
        raise BenchError(f"{part} part was computed with other analysis settings",
                         file=str(path), field="settings")
    body = doc["data"]
    if part == "sensitivity":
        return {k: _frame(v) if v is not None else None for k, v in body.items()}
    return {"configured": [(claim, _comparison(c)) for claim, c in body["configured"]],
            "sweep": [_comparison(c) for c in body["sweep"]],
            "divergence": body["divergence"], "skipped": body["skipped"],
            "intervals": body["intervals"], "resamples": body["resamples"]}
