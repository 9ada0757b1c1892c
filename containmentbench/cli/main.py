"""``containmentbench <verb>``: one command per pipeline step.

Every verb turns bad input into one line on stderr naming the file, line or field, and exit
status 2, before anything is written (``BenchError``); verification failures exit 1.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from containmentbench import __version__
from containmentbench.errors import BenchError


class _Parser(argparse.ArgumentParser):
    #: the command line being parsed (set by :func:`_main`), for the hint after an error
    argv: Sequence[str] = ()

    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}{_hint(self.argv, message)}\n")


def _hint(argv: Sequence[str], message: str) -> str:
    """The right form after a usage error a newcomer makes: ``--study NAME`` where a verb
    takes ``study=NAME`` (``show`` takes its run directory as ``--run-dir``)."""
    if "unrecognized arguments" not in message or "--study" not in argv:
        return ""
    verb = next((a for a in argv if not a.startswith("-")), "VERB")
    if verb == "show":
        return "; show takes the run directory as --run-dir RUN_DIR"
    i = list(argv).index("--study")
    name = argv[i + 1] if i + 1 < len(argv) and "=" not in argv[i + 1] else "NAME"
    return f"; say the study as study={name} (e.g. containmentbench {verb} study={name})"


#: the verbs in the groups ``--help`` shows them in, a newcomer's first: a group's title, then
#: its verbs (module names: ``cross_model`` is the verb ``cross-model``)
GROUPS = (
    ("start here", ("run", "headline", "status", "compare", "report", "list")),
    ("inspect", ("show", "verify", "config", "defenses", "cases", "scenarios")),
    ("pipeline steps (each a Snakemake rule calls)",
     ("rollout", "reparse", "metrics", "sensitivity", "bootstrap", "analyze", "freeze",
      "reproduce", "cross_model")),
    ("research", ("audit", "cim", "adapters", "search", "replay", "parse")),
)
# verb modules, each exposing register(subparsers); imported lazily so `--help` stays fast
# and heavy optional packages are only touched by the verbs that need them.
VERBS = tuple(v for _, verbs in GROUPS for v in verbs)


class _TopParser(_Parser):
    """``containmentbench --help``: the verbs under their groups (argparse lists them flat)."""

    def format_help(self) -> str:
        import shutil
        import textwrap

        fmt = self._get_formatter()
        fmt.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        fmt.add_text(self.description)
        text = fmt.format_help()
        # each verb's one-line help as its register() gave it (argparse keeps them on the
        # subparsers action; they are %-templates, as argparse formats them: 95%% -> 95%)
        sub = self._subparsers._group_actions[0] if self._subparsers else None
        helps = {a.dest: (a.help or "") % {} for a in getattr(sub, "_choices_actions", [])}
        width = max(60, min(100, shutil.get_terminal_size().columns)) - 2
        for title, verbs in GROUPS:
            text += f"\n{title}:\n"
            for name in (v.replace("_", "-") for v in verbs):
                if name not in helps:
                    continue
                body = textwrap.wrap(helps[name], width - 16) or [""]
                text += f"  {name:<13} {body[0]}\n"
                text += "".join(f"{'':16}{line}\n" for line in body[1:])
        text += "\noptions:\n  -h, --help     show this help message and exit\n" \
                "  --version      show the version and exit\n\n"
        text += "\n".join(textwrap.wrap(
            "containmentbench VERB --help shows a verb's own options. A study is said the same "
            "way by every verb: study=NAME key=value ... (Hydra overrides), or a run directory "
            "where a verb reads a finished run.", width)) + "\n"
        return text


def _invoked_verb(argv: Sequence[str]) -> str | None:
    """The verb module of a command line (its first word that is not an option), or None."""
    for arg in argv:
        if not arg.startswith("-"):
            mod = arg.replace("-", "_")  # `cross-model` lives in cross_model_cmd
            return mod if mod in VERBS else None
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb, or of the verb ``only`` alone: each rollout or metrics job
    is a fresh process, and importing all verb modules (pulling in the CIM and analysis
    stacks) would add a fixed cost to every one of them."""
    import importlib

    p = _TopParser(prog="containmentbench",
                description="Trace-based evaluation of post-injection containment.")
    p.add_argument("--version", action="version", version=f"containmentbench {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for verb in (only,) if only else VERBS:
        try:
            mod = importlib.import_module(f"containmentbench.cli.{verb}_cmd")
        except ModuleNotFoundError as exc:
            if exc.name == f"containmentbench.cli.{verb}_cmd":
                continue  # verb not built yet
            raise
        mod.register(sub)
    return p


# Verbs whose work is per-record Python (no linear algebra): numpy's OpenBLAS would start a
# thread per core at import for nothing, ~0.05 s CPU of every job process. Set before numpy is
# first imported; an explicit setting in the environment wins. Model backends (torch, vLLM)
# use their own thread pools, not numpy's.
SINGLE_BLAS_THREAD = ("rollout", "replay", "reparse", "parse", "status", "verify")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _invoked_verb(argv) in SINGLE_BLAS_THREAD and "numpy" not in sys.modules:
        import os

        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from containmentbench.fastpath import block_pandas, unblock_pandas

    blocked = block_pandas()
    # A verb builds millions of small, long-lived objects (trace rows, events, episodes) and
    # frees few cycles; at the default thresholds the cyclic collector rescans them over and
    # over (~30% of a rollout job's CPU). Collections stay on, just rarer; restored after.
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        return _main(argv)
    except BrokenPipeError:
        return _closed_pipe()
    finally:  # a caller in the same process (tests, notebooks) keeps its pandas
        atomic = sys.modules.get("containmentbench.integrity.atomic")
        if atomic is not None:  # the study locks this command took
            atomic.release_locks()
        gc.set_threshold(*thresholds)
        if blocked:
            unblock_pandas()


def _main(argv: list[str]) -> int:
    parser = build_parser(_invoked_verb(argv))
    _Parser.argv = tuple(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (exit 2) and --help (exit 0)
        return int(exc.code or 0)
    try:
        rc = args.func(args)
    except BrokenPipeError:  # `| head` closed stdout: not an error of the input
        return _closed_pipe()
    except BenchError as exc:
        print(f"containmentbench: error: {exc.render()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("containmentbench: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, RecursionError, MemoryError) as exc:
        # unreadable input the verb did not anticipate (pyarrow's errors are ValueErrors or
        # OSErrors): still one line naming the file, never a traceback (issue: data safety)
        print(f"containmentbench: error: {_input_error(exc, args)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if not _corrupt_parquet(exc):
            raise
        # a Parquet file whose footer reads but whose pages do not (polars reads lazily;
        # the footers were checked on open: integrity/inputs.py)
        print(f"containmentbench: error: {_input_error(exc, args)}", file=sys.stderr)
        return 2
    return int(rc or 0)


def _corrupt_parquet(exc: BaseException) -> bool:
    """polars' own Parquet decoder failing on damaged data pages (``ComputeError: parquet:
    File out of specification ...``): bad input, not a bug of the verb."""
    polars = sys.modules.get("polars")
    return polars is not None and isinstance(exc, polars.exceptions.ComputeError) and \
        str(exc).startswith("parquet:")


def _no_space(exc: BaseException) -> bool:
    import errno

    return isinstance(exc, OSError) and (exc.errno in (errno.ENOSPC, errno.EDQUOT)
                                         or "No space left on device" in str(exc))


#: the exit status of a process ended by SIGPIPE in a shell (128 + 13)
CLOSED_PIPE = 141


def _closed_pipe() -> int:
    """The reader of stdout went away (``containmentbench list studies | head -1``): stop
    quietly with 141, as a process killed by SIGPIPE would, and point stdout at /dev/null so
    the interpreter's last flush at exit cannot print a traceback either."""
    from containmentbench.integrity.writer import stdout_to_devnull

    stdout_to_devnull()
    return CLOSED_PIPE


def _input_error(exc: BaseException, args: argparse.Namespace) -> str:
    from pathlib import Path

    where = getattr(exc, "filename", None)
    if _no_space(exc):
        # a write failed: name the output (a full disk is not an input problem); file
        # objects' write() and pyarrow's writers raise it without a file name
        out = getattr(args, "out", None)
        return f"{where or out or 'output'}: no space left on device while writing " \
               f"(ENOSPC){f'; output {out}' if out and where and str(out) not in where else ''}"
    if where is None:
        paths = [str(v) for v in vars(args).values() if isinstance(v, Path)]
        where = paths[0] if paths else None
    text = " ".join(str(getattr(exc, "strerror", None) or exc).split()) or type(exc).__name__
    if isinstance(exc, RecursionError):
        text = "input nested too deeply"
    return f"{where}: {type(exc).__name__}: {text}" if where else f"{type(exc).__name__}: {text}"


if __name__ == "__main__":
    raise SystemExit(main())
