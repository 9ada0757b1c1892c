"""``containmentbench compare RUN_DIR... | study=NAME [key=value ...] a=X b=Y metric=M
[stage=S] [--json] [--differ-in KEY]``: any paired comparison of two defenses on demand (paper 000 eq. 12, §6.5),
not only the ones the study configured for Tables 12 and 25.

``a``, ``b``, ``metric`` and ``stage`` are the comparison; every other ``key=value`` token is a
study override, as for every other verb. The intervals are resampled with the run's own
analysis settings (``analysis/on_demand.py``), so a configured pair prints its table row's
numbers. The output names the estimate b - a ``estimate``, its scenario-cluster interval
``ci_low``/``ci_high``, the pair interval ``pair_ci_low``/``pair_ci_high``, the pairs ``n`` and
their clusters ``n_clusters``; the simulated agent's numbers say so. Several runs (run
directories, or the models of a study) are shown side by side only when they were served
alike (models/serving.py), or ``--differ-in`` names the keys in which they differ.
"""

from __future__ import annotations

import argparse
import json
import sys

from containmentbench.cli import serving_args, study_args
from containmentbench.errors import BenchError

#: the tokens that say the comparison (the rest are the study's overrides)
KEYS = ("a", "b", "metric", "stage")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="any paired comparison of two defenses (b - a) with scenario-cluster "
                        "intervals, e.g. compare study=smoke a=none b=tool_boundary "
                        "metric=committed_harm",
        description="Paired delta b - a of one metric over (scenario, model, seed) pairs "
                    "(eq. 12) with 95% scenario-cluster and pair intervals (§6.5), resampled "
                    "with the run's own analysis settings.")
    p.add_argument("target", nargs="*",
                   metavar="RUN_DIR | study=NAME [key=value ...] a=X b=Y metric=M [stage=S]",
                   help="a run directory or the study's overrides, and the comparison: "
                        "a= and b= two defenses, metric= a glossary key (docs/metrics.md), "
                        "stage= security, memory_recovery, active_tainted, clean or all "
                        "(default all: every stage where the metric is defined)")
    p.add_argument("--json", action="store_true", help="print the record(s) as JSON")
    serving_args.add(p)
    p.set_defaults(func=cmd_compare)


def split(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    """(the comparison's keys, the study's tokens)."""
    spec: dict[str, str] = {}
    rest = []
    for tok in tokens:
        key, eq, value = tok.partition("=")
        if eq and key in KEYS:
            if key in spec:
                raise BenchError(f"'{key}' given twice ('{key}={spec[key]}', '{tok}')",
                                 field=key)
            spec[key] = value
        else:
            rest.append(tok)
    missing = [k for k in ("a", "b", "metric") if not spec.get(k)]
    if missing:
        raise BenchError(f"say {' and '.join(k + '=...' for k in missing)} (e.g. containmentbench"
                         f" compare study=smoke a=none b=tool_boundary metric=committed_harm)",
                         field=missing[0])
    return spec, rest


def cmd_compare(args: argparse.Namespace) -> int:
    from containmentbench import results
    from containmentbench.analysis.on_demand import text

    spec, rest = split(args.target)
    recs = []
    from pathlib import Path

    if len(rest) > 1 and all("=" not in t and Path(t).is_dir() for t in rest):
        dirs = [Path(t) for t in rest]  # several run directories side by side
    else:
        dirs = study_args.run_dirs(rest, "compare")
    # the runs of several models side by side: only when served alike, or told the point
    serving_args.check_runs(dirs, serving_args.keys(args.differ_in))
    for d in dirs:
        recs.append(results.compare(d, spec["a"], spec["b"], spec["metric"],
                                    spec.get("stage") or "all"))
    if args.json:
        out = recs[0] if len(recs) == 1 else recs
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return 0
    sys.stdout.write("\n".join(text(r) for r in recs))
    return 0
