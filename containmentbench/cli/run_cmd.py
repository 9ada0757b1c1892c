"""``containmentbench run study=NAME [key=value ...] [--cores N] [-n]``: run a study end to end
through Snakemake, the one DAG (scenarios, rollouts, reparse, metrics, analysis, audit, report,
freeze; the headline at the end).

The overrides are the same strings as every other verb's (``study.seeds=[1]``,
``results_dir=/tmp/r``): no ``'overrides=[...]'`` quoting. They are composed and validated here
first (one line, exit 2, before Snakemake starts), then handed to the Snakemake of this
interpreter as ``--config study=NAME overrides=[...]``, the list written as JSON, which
Snakemake's YAML reading of ``--config`` values takes back exactly
(``pipeline/snake.py: overrides_from``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from containmentbench.cli import study_args


def _cores(text: str) -> str:
    if text == "all" or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"must be a positive integer or 'all', got {text!r}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="run a study end to end through Snakemake, e.g. run study=smoke "
                    "study.seeds=[1] (the same key=value overrides as every verb)")
    study_args.add(p)
    p.add_argument("--cores", type=_cores, default="2",
                   help="CPU cores Snakemake may use (a number or 'all'; default 2)")
    p.add_argument("-n", "--dry-run", action="store_true",
                   help="show what would run (snakemake -n), run nothing")
    p.add_argument("--profile", default=None,
                   help="a Snakemake profile folder (e.g. slurm/profile for a Slurm cluster)")
    p.add_argument("--snakemake", action="append", default=[], metavar="ARG",
                   help="one more argument for Snakemake, as it is written (repeatable: "
                        "--snakemake=--keep-going)")
    p.add_argument("--print", dest="print_only", action="store_true",
                   help="print the Snakemake command line and exit")
    p.set_defaults(func=cmd_run)


def snakemake_argv(tokens: list[str], cores: str = "2", dry_run: bool = False,
                   profile: str | None = None, extra: list[str] | None = None) -> list[str]:
    """The Snakemake command line of a study said as ``study=NAME key=value ...``."""
    study = [t.partition("=")[2] for t in tokens if t.startswith("study=")]
    rest = [t for t in tokens if not t.startswith("study=")]
    exe = Path(sys.executable).parent / "snakemake"
    argv = [str(exe)] if exe.is_file() else [sys.executable, "-m", "snakemake"]
    if not (Path.cwd() / "Snakefile").is_file():
        from containmentbench.config.loader import config_dir

        argv += ["-s", str(config_dir().parent / "Snakefile")]
    argv += ["--cores", cores]
    if dry_run:
        argv.append("-n")
    if profile:
        argv += ["--profile", profile]
    argv += list(extra or [])
    argv += ["--config", f"study={study[-1]}"]
    if rest:
        argv.append("overrides=" + json.dumps(rest, ensure_ascii=False, separators=(",", ":")))
    return argv


def cmd_run(args: argparse.Namespace) -> int:
    from containmentbench.errors import BenchError

    study_args.runs(args.target, "run")  # composed and validated: one line, exit 2
    if not any(t.startswith("study=") for t in args.target):
        raise BenchError("say which study: containmentbench run study=NAME [key=value ...]",
                         field="study")
    argv = snakemake_argv(args.target, args.cores, args.dry_run, args.profile, args.snakemake)
    if args.print_only:
        import shlex

        print(shlex.join(argv))
        return 0
    sys.stdout.flush()
    return wait(subprocess.Popen(argv))


def wait(proc: subprocess.Popen) -> int:
    """Snakemake's exit status. Ctrl-C reaches Snakemake too (one process group): it stops its
    jobs, marks their outputs incomplete and releases its lock, which takes a moment;
    ``subprocess.run`` would kill it 0.25 s after the interrupt, so wait for it instead."""
    interrupted = False
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
    return 130 if interrupted and rc != 0 else rc
