"""``containmentbench analyze METRICS_FILE --out DIR``: statistics, tables and figures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from containmentbench.cli import argtypes as T
from containmentbench.errors import BenchError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="stage means, paired and cluster bootstrap intervals, "
                                       "sensitivity analyses, tables and figures")
    p.add_argument("metrics", type=Path, help="rollout_metrics.parquet")
    p.add_argument("--out", type=Path, required=True, help="output folder (tables/, figures/)")
    add_config_args(p)
    p.add_argument("--reparse", type=Path, default=None,
                   help="reparse summary JSON to render Table 24")
    p.add_argument("--sensitivity", type=Path, default=None,
                   help="cached sensitivity part (containmentbench sensitivity); else computed")
    p.add_argument("--bootstrap", type=Path, default=None,
                   help="cached bootstrap part (containmentbench bootstrap); else computed")
    p.set_defaults(func=cmd_analyze)


def add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--analysis", default="default",
                   help="analysis config option name or YAML file (config/analysis/)")
    p.add_argument("--config", type=Path, default=None,
                   help="resolved study config whose `analysis` section to use")
    p.add_argument("--resamples", type=T.resamples, default=None,
                   help="override bootstrap resamples")
    p.add_argument("--force", action="store_true",
                   help="redo this output of a frozen study (old bytes kept under "
                        ".replaced-N/; re-freeze after)")


def analysis_config(args: argparse.Namespace) -> dict:
    """The ``analysis`` config section named by --config / --analysis, with --resamples."""
    from containmentbench.config.loader import load_option
    from containmentbench.pipeline.mixing import check_metrics

    if args.config is not None:
        from containmentbench.config.compose import read_resolved
        cfg = read_resolved(args.config)["analysis"]
    else:
        cfg = load_option("analysis", args.analysis)
    if args.resamples is not None:
        cfg["resamples"] = args.resamples
    if args.metrics.exists():
        check_metrics(args.metrics)  # never pool two models or configs
    return cfg


def check_analyze_out(metrics: Path, out: Path, force: bool = False) -> None:
    """``--out`` is a run directory the pipeline made, an earlier analyze output, or a new or
    empty folder, and not another model's: analyze never writes its tables into a foreign
    folder or over another run's tables, nor into a frozen study without ``--force``."""
    from containmentbench.integrity import writer

    writer.check_out(out, "run", force, accept=("analysis", "folder"))
    writer.check_file(out / "analysis.json", "analysis", force)
    own = out / "metrics" / "rollout_metrics.parquet"
    if own.is_file() and metrics.exists() and own.resolve() != metrics.resolve():
        import pyarrow.parquet as pq

        def ident(p: Path) -> set[tuple[str, str]]:
            try:
                t = pq.read_table(p, columns=["model", "backend"])
            except Exception:  # unreadable: check_metrics reports the input; skip the other
                return set()
            return set(zip(t.column("model").to_pylist(), t.column("backend").to_pylist(),
                           strict=True))
        theirs, ours = ident(own), ident(metrics)
        if theirs and ours and theirs != ours:
            (m, b) = sorted(theirs)[0]
            raise BenchError(f"refusing to overwrite the tables of another run (model '{m}', "
                             f"backend '{b}'); each model needs its own run directory",
                             file=str(out), field="out")


def cmd_analyze(args: argparse.Namespace) -> int:
    from containmentbench.analysis.run import analyze
    from containmentbench.integrity import reading, writer

    cfg = analysis_config(args)
    check_analyze_out(args.metrics, args.out, args.force)
    from containmentbench.integrity.inputs import load_json

    for part in (args.sensitivity, args.bootstrap):
        if part is not None:  # their shape before any table is written (read_part: the rest)
            load_json(part, "analysis_part")
    summary = None
    if args.reparse is not None:
        summary = load_json(args.reparse, "reparse_summary")  # its shape, then its bytes
        reading.trusted(args.reparse)
    with writer.forcing(args.force):
        info = analyze(args.metrics, args.out, cfg, summary, args.sensitivity, args.bootstrap)
    label = " [simulated agent: harness validation, not a model result]" \
        if info["simulated_agent"] else ""
    print(f"wrote {args.out}: {len(info['tables'])} tables, {len(info['figures'])} figures, "
          f"{info['intervals']} intervals x {info['resamples']} resamples "
          f"({info['seconds']:.1f} s){label}", file=sys.stderr)
    for s in info["skipped"]:
        print(f"skipped (defense not in metrics): {s}", file=sys.stderr)
    return 0
