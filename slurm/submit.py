#!/usr/bin/env python3
"""Submit the Snakemake controller of a ContainmentBench study as one long Slurm job (via submitit).

The study is said the way every entry point says it: Hydra overrides ``study=NAME key=value ...``
(the same strings as ``containmentbench status`` and ``snakemake --config``). The controller job
runs ``snakemake --profile <profile> --config study=<study> 'overrides=[key=value,...]' [extra
args]`` from the repository root; with a Slurm profile (slurm/profile, slurm/profile-local-ci)
Snakemake then submits every rule as its own Slurm job. Only the controller needs a long time
limit, little memory and one CPU.

    python slurm/submit.py study=pilot cluster=slurm --partition long --time-min 2880
    python slurm/submit.py study=pilot --dry-run -- --forcerun rollout

Everything after ``--`` is passed to snakemake unchanged. Resuming is the same submission again:
finished outputs are kept and ``--rerun-incomplete`` (set in the profiles) regenerates only the
shards that were missing, interrupted or failed. ``--wait`` blocks until the controller ends and exits
with Snakemake's exit code.

Exit status: 0 submitted (or dry run / controller succeeded), 2 bad arguments, 1 submission failed,
otherwise the controller's exit code with --wait.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROFILE = REPO_ROOT / "slurm" / "profile"
DEFAULT_LOG_DIR = REPO_ROOT / "results" / "logs" / "controller"
PROFILE_FILES = ("config.v8+.yaml", "config.yaml")
STUDY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class UsageError(Exception):
    """A bad command-line argument; reported as one line, exit status 2."""


def split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split argv at the first ``--``: (our arguments, snakemake arguments)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of usage + message
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="slurm/submit.py",
        description="Submit the Snakemake controller for a study as a long Slurm job (submitit).",
        epilog="Arguments after -- are passed to snakemake unchanged.",
    )
    p.add_argument(
        "target",
        nargs="*",
        metavar="study=NAME [key=value ...]",
        help="the study as Hydra overrides, e.g. study=full_main cluster=slurm backend=vllm "
        "model=qwen2_5_7b_instruct (validated before anything is submitted)",
    )
    # the old spelling: refused with the right form (one way to say a study)
    p.add_argument("--study", default=None, help=argparse.SUPPRESS)
    p.add_argument("--overrides", nargs="*", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--profile",
        default=str(DEFAULT_PROFILE),
        help="Snakemake profile directory (default: slurm/profile)",
    )
    p.add_argument(
        "--partition", help="Slurm partition of the controller job (default: cluster default)"
    )
    p.add_argument("--account", help="Slurm account of the controller job")
    p.add_argument(
        "--time-min",
        type=int,
        default=24 * 60,
        help="controller time limit in minutes (default 1440)",
    )
    p.add_argument("--mem-gb", type=float, default=4.0, help="controller memory in GB (default 4)")
    p.add_argument("--cpus", type=int, default=1, help="controller CPUs (default 1)")
    p.add_argument(
        "--log-dir",
        default=str(DEFAULT_LOG_DIR),
        help="submitit folder for the controller's logs and pickles (default: results/logs/controller)",
    )
    p.add_argument("--job-name", help="Slurm job name (default: cb-<study>)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the command and settings, submit nothing"
    )
    p.add_argument(
        "--wait", action="store_true", help="wait for the controller and exit with its exit code"
    )
    return p


def study_of(args: argparse.Namespace) -> None:
    """``args.study`` and ``args.overrides`` from the ``study=NAME key=value`` tokens."""
    if args.study is not None or args.overrides is not None:
        old = [f"study={args.study}" if args.study else "study=NAME", *(args.overrides or [])]
        raise UsageError(f"say the study as overrides: python slurm/submit.py {' '.join(old)}")
    bad = [t for t in args.target if "=" not in t or t.startswith("=")]
    if bad:
        raise UsageError(f"'{bad[0]}' is not an override (key=value); e.g. python "
                         f"slurm/submit.py study={bad[0] if '=' not in bad[0] else 'NAME'}")
    studies = [t.split("=", 1)[1] for t in args.target if t.startswith("study=")]
    if len(studies) != 1:
        raise UsageError("name the study once: python slurm/submit.py study=NAME "
                         "[key=value ...]")
    args.study = studies[0]
    args.overrides = [t for t in args.target if not t.startswith("study=")]


def validate(args: argparse.Namespace) -> None:
    study_of(args)
    if not STUDY_RE.match(args.study):
        raise UsageError(f"study must match {STUDY_RE.pattern} (got {args.study!r})")
    profile = Path(args.profile)
    if not profile.is_dir():
        raise UsageError(f"--profile {args.profile!r} is not a directory")
    if not any((profile / f).is_file() for f in PROFILE_FILES):
        raise UsageError(f"--profile {args.profile!r} has no {' or '.join(PROFILE_FILES)}")
    if args.time_min <= 0:
        raise UsageError(f"--time-min must be a positive number of minutes (got {args.time_min})")
    if not args.mem_gb > 0:
        raise UsageError(f"--mem-gb must be positive (got {args.mem_gb})")
    if args.cpus < 1:
        raise UsageError(f"--cpus must be at least 1 (got {args.cpus})")
    for name in ("partition", "account", "job_name"):
        value = getattr(args, name)
        if value is not None and not re.match(r"^[A-Za-z0-9_.,:-]+$", value):
            raise UsageError(f"--{name.replace('_', '-')} has invalid characters: {value!r}")
    log_dir = Path(args.log_dir)
    if log_dir.exists() and not log_dir.is_dir():
        raise UsageError(f"--log-dir {args.log_dir!r} exists and is not a directory")


def snakemake_executable() -> str:
    """The snakemake next to this interpreter (the job may not have the venv on PATH)."""
    local = Path(sys.executable).parent / "snakemake"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("snakemake")
    if found:
        return found
    raise UsageError(
        "snakemake not found next to this Python nor on PATH (install the 'pipeline' extra)"
    )


def check_study(args: argparse.Namespace) -> None:
    """Compose and validate the study config here, so a bad key fails before submission."""
    from containmentbench.config.compose import load_study
    from containmentbench.errors import BenchError

    try:
        load_study([f"study={args.study}", *args.overrides])
    except BenchError as exc:
        raise UsageError(exc.render()) from None


def build_command(args: argparse.Namespace, extra: list[str]) -> list[str]:
    config = [f"study={args.study}"]
    if args.overrides:
        config.append(f"overrides=[{','.join(args.overrides)}]")
    return [
        snakemake_executable(),
        "--profile",
        str(Path(args.profile).resolve()),
        "--config",
        *config,
        *extra,
    ]


def resume_command(argv: list[str]) -> str:
    """The same submission again (minus --dry-run), runnable from any directory."""
    ours, extra = split_passthrough(argv)
    ours = [a for a in ours if a != "--dry-run"]
    parts = [sys.executable, str(Path(__file__).resolve()), *ours]
    if extra:
        parts += ["--", *extra]
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join(parts)}"


def run_controller(cmd: list[str], cwd: str) -> int:
    """Runs inside the Slurm job: snakemake in the foreground, output to the job's log."""
    import os
    import subprocess
    import sys

    # The controller's own SLURM_* variables must not leak into the jobs Snakemake submits
    # (sbatch --export=ALL), e.g. SLURM_MEM_PER_NODE would clash with per-rule --mem.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_"))}
    print("controller command:", " ".join(cmd), flush=True)
    print("working directory:", cwd, flush=True)
    rc = subprocess.call(cmd, cwd=cwd, env=env)
    print(f"snakemake exited with {rc}", flush=True)
    sys.stdout.flush()
    return rc


def executor_parameters(args: argparse.Namespace) -> dict:
    params: dict = {
        "name": args.job_name or f"cb-{args.study}",
        "timeout_min": args.time_min,
        "mem_gb": args.mem_gb,
        "cpus_per_task": args.cpus,
        "tasks_per_node": 1,
        "nodes": 1,
    }
    if args.partition:
        params["slurm_partition"] = args.partition
    if args.account:
        params["slurm_account"] = args.account
    return params


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, extra = split_passthrough(argv)
    try:
        args = build_parser().parse_args(ours)
        validate(args)
        check_study(args)
        cmd = build_command(args, extra)
    except UsageError as err:
        print(f"submit.py: error: {err}", file=sys.stderr)
        return 2

    log_dir = Path(args.log_dir).resolve()
    params = executor_parameters(args)
    print("command:", shlex.join(cmd))
    print("workdir:", REPO_ROOT)
    print("controller job:", ", ".join(f"{k}={v}" for k, v in params.items()))
    print("log dir:", log_dir)
    if args.dry_run:
        print("dry run: nothing submitted")
        print("submit with:", resume_command(argv))
        return 0

    if shutil.which("sbatch") is None:
        print(
            "submit.py: error: sbatch not found on PATH (not on a Slurm login node?)",
            file=sys.stderr,
        )
        return 1
    try:
        import submitit
    except ImportError:
        print(
            "submit.py: error: submitit is not installed (pip install '.[pipeline]')",
            file=sys.stderr,
        )
        return 1

    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        executor = submitit.AutoExecutor(folder=log_dir, cluster="slurm")
        executor.update_parameters(**params)
        job = executor.submit(run_controller, cmd, str(REPO_ROOT))
    except Exception as err:  # sbatch errors come back as RuntimeError/FailedJobError
        msg = " ".join(str(err).split())
        print(f"submit.py: error: submission failed: {msg}", file=sys.stderr)
        return 1

    print("job id:", job.job_id)
    print("stdout:", job.paths.stdout)
    print("stderr:", job.paths.stderr)
    print("resume (reruns only missing, interrupted or failed shards):", resume_command(argv))
    sys.stdout.flush()
    if not args.wait:
        return 0

    try:
        rc = job.result()
    except Exception as err:  # UncompletedJobError (killed, timeout) or FailedJobError
        first = " ".join(str(err).split())[:300]
        print(
            f"submit.py: error: controller job {job.job_id} did not complete: {first}",
            file=sys.stderr,
        )
        return 1
    print(f"controller job {job.job_id} finished: snakemake exit code {rc}")
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
