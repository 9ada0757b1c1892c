"""``containmentbench analyze METRICS_FILE --out DIR``: statistics, tables and figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from containmentbench.errors import BenchError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="stage means, paired and cluster bootstrap intervals, "
                                       "sensitivity analyses, tables and figures")
    p.add_argument("metrics", type=Path, help="rollout_metrics.parquet")
    p.add_argument("--out", type=Path, required=True, help="output folder (tables/, figures/)")
    p.add_argument("--analysis", default="default",
                   help="analysis config option name or YAML file (config/analysis/)")
    p.add_argument("--config", type=Path, default=None,
                   help="resolved study config whose `analysis` section to use")
    p.add_argument("--reparse", type=Path, default=None,
                   help="reparse summary JSON to render Table 24")
    p.add_argument("--resamples", type=int, default=None, help="override bootstrap resamples")
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    from containmentbench.analysis.run import analyze
    from containmentbench.config.loader import load_option
    from containmentbench.pipeline.mixing import check_metrics

    if args.config is not None:
        from containmentbench.config.compose import read_resolved
        cfg = read_resolved(args.config)["analysis"]
    else:
        cfg = load_option("analysis", args.analysis)
    if args.resamples is not None:
        if args.resamples < 1:
            raise BenchError("must be >= 1", field="resamples")
        cfg["resamples"] = args.resamples
    if args.metrics.exists():
        check_metrics(args.metrics)  # never pool two models or configs
    summary = None
    if args.reparse is not None:
        if not args.reparse.exists():
            raise BenchError("reparse summary not found", file=str(args.reparse))
        summary = json.loads(args.reparse.read_text())
    info = analyze(args.metrics, args.out, cfg, summary)
    label = " [simulated agent: harness validation, not a model result]" \
        if info["simulated_agent"] else ""
    print(f"wrote {args.out}: {len(info['tables'])} tables, {len(info['figures'])} figures, "
          f"{info['intervals']} intervals x {info['resamples']} resamples "
          f"({info['seconds']:.1f} s){label}", file=sys.stderr)
    for s in info["skipped"]:
        print(f"skipped (defense not in metrics): {s}", file=sys.stderr)
    return 0
