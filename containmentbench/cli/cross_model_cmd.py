"""``containmentbench cross-model METRICS... --out DIR``: models of one study side by side:
the paired deltas per defense, their headline, the report, then the folder's manifest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from containmentbench.cli import argtypes as T
from containmentbench.cli import serving_args
from containmentbench.errors import BenchError, VerifyError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cross-model", help="compare the models of a study per defense (paired "
                                           "by scenario and seed, scenario-cluster bootstrap)")
    p.add_argument("metrics", type=Path, nargs="*",
                   help="each model's metrics/rollout_metrics.parquet (first: reference)")
    p.add_argument("--out", type=Path, required=True, help="output folder (cross_model/)")
    p.add_argument("--reproduce", action="store_true",
                   help="rebuild the tables of --out from the metrics it names and compare "
                        "bytes with the frozen ones")
    p.add_argument("--config", type=Path, default=None,
                   help="resolved study config whose `analysis` section to use")
    p.add_argument("--resamples", type=T.resamples, default=None,
                   help="override bootstrap resamples")
    p.add_argument("--force", action="store_true",
                   help="redo a frozen cross-model folder (old bytes kept under .replaced-N/)")
    serving_args.add(p)
    p.set_defaults(func=cmd_cross_model)


def cmd_cross_model(args: argparse.Namespace) -> int:
    from containmentbench.analysis.cross_model import cross_model
    from containmentbench.config.loader import load_option

    if args.reproduce:
        from containmentbench.analysis.cross_model import reproduce_cross
        from containmentbench.integrity.inputs import load_json

        info = args.out / "analysis.json"
        if info.exists():  # the settings and inputs it rebuilds from, checked first
            load_json(info, "cross_model")
        r = reproduce_cross(args.out)
        if r["differ"]:
            raise VerifyError(f"{len(r['differ'])} of {r['compared']} cross-model files "
                              f"differ; first: {r['differ'][0]}", file=str(args.out))
        print(f"reproduce: {r['compared']} cross-model files byte-identical to the frozen "
              f"ones", file=sys.stderr)
        return 0
    if len(args.metrics) < 2:
        raise BenchError("give at least two models' metrics tables", field="metrics")
    from containmentbench.integrity import writer

    writer.check_out(args.out, "cross-model", args.force)  # never a run folder or a foreign one
    writer.check_file(args.out / "analysis.json", "cross-model", args.force)
    for m in args.metrics:
        if not m.exists():
            raise BenchError("metrics table not found", file=str(m))
    differ_in = serving_args.keys(args.differ_in)
    if args.config is not None:
        from containmentbench.config.compose import read_resolved
        resolved = read_resolved(args.config)
        cfg = resolved["analysis"]
        # the study's own declaration (study.differ_in), as its config check applied it
        differ_in += [k for k in resolved["study"].get("differ_in") or [] if k not in differ_in]
    else:
        cfg = load_option("analysis", "default")
    # models served differently (engine, version, parser, template, ...) only when told
    declared = serving_args.check_runs([Path(m).resolve().parents[1] for m in args.metrics],
                                       differ_in)
    if args.resamples is not None:
        cfg["resamples"] = args.resamples
    from containmentbench.analysis.cross_model import freeze_cross
    from containmentbench.report.cross import build_cross_report

    with writer.forcing(args.force):
        info = cross_model(args.metrics, args.out, cfg)
        # the models' headlines side by side, then the deltas (run dirs hold the metrics)
        build_cross_report(args.out, [Path(m).resolve().parents[1] for m in args.metrics])
        freeze_cross(args.out, args.metrics)
    label = " [simulated agent: harness validation, not a model result]" \
        if info["simulated_agent"] else ""
    served = f"; served differently in {', '.join(declared)}, as declared" if declared else ""
    print(f"wrote {args.out}: {info['comparisons']} comparisons of {', '.join(info['models'])} "
          f"over {len(info['defenses'])} defenses{label}{served}", file=sys.stderr)
    return 0
