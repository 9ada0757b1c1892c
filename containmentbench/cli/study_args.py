"""One way to say a study: ``study=NAME key=value ...`` (Hydra overrides, the same strings as
``containmentbench run study=NAME key=value ...``, ``slurm/submit.py study=NAME ...`` and
``snakemake --config study=NAME key=value ...``, where a dotted key goes inside
``'overrides=[...]'``: Snakemake refuses dots in ``--config`` keys).

Verbs that act on a finished run (``report``, ``reproduce``, ``headline``, ``verify``) also take
the run directory itself. Any other form is a one-line error that shows the right one:
``status full_main`` says ``containmentbench status study=full_main``, ``status study=full_main
backend`` names the token without ``=``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from containmentbench.errors import BenchError

HELP = ("the study as Hydra overrides, e.g. study=full_main backend=vllm "
        "model=qwen2_5_7b_instruct study.seeds=[1] (the same strings for every verb and "
        "containmentbench run)")
HELP_OR_DIR = ("a run directory (results/<study>/<model>), or the study as Hydra overrides, "
               "e.g. study=full_main model=sim (the same strings for every verb and "
               "containmentbench run)")


def add(p: argparse.ArgumentParser, run_dir: bool = False) -> None:
    """The positional ``STUDY`` tokens of a verb."""
    p.add_argument("target", nargs="*", metavar="study=NAME [key=value ...]" if not run_dir
                   else "RUN_DIR | study=NAME [key=value ...]",
                   help=HELP_OR_DIR if run_dir else HELP)


def _known_study(name: str) -> bool:
    from containmentbench.config.loader import config_dir

    try:
        return (config_dir() / "study" / f"{name}.yaml").is_file()
    except BenchError:
        return False


def _right_form(verb: str, tok: str) -> str:
    name = tok if _known_study(tok) else "NAME"
    return f"containmentbench {verb} study={name} [key=value ...]"


def overrides(tokens: list[str], verb: str) -> list[str]:
    """``tokens`` checked as overrides (every one ``key=value``), or a one-line error."""
    for tok in tokens:
        if "=" not in tok or tok.startswith("="):
            hint = (f"say the study as study={tok}" if _known_study(tok) else
                    "an override is key=value")
            raise BenchError(f"'{tok}' is not an override ({hint}; e.g. "
                             f"{_right_form(verb, tok)})", field="study")
    return tokens


def runs(tokens: list[str], verb: str) -> list[dict[str, Any]]:
    """The composed runs (one per model) the override tokens name."""
    from containmentbench.pipeline.runs import load_runs

    if not tokens:
        raise BenchError(f"say which study: {_right_form(verb, '')}", field="study")
    return load_runs(overrides(tokens, verb))


def run_dirs(tokens: list[str], verb: str) -> list[Path]:
    """A run directory given as a path, or every model's run directory of the study the
    overrides name (which must exist)."""
    from containmentbench.pipeline.plan import run_dir

    if tokens and "=" not in tokens[0]:
        p = Path(tokens[0])
        if len(tokens) > 1:
            raise BenchError(f"a run directory takes no overrides ('{tokens[1]}'); say "
                             f"either {tokens[0]} or study=NAME key=value ...", field="study")
        if p.is_dir():
            return [p]
        if _known_study(tokens[0]):
            raise BenchError(f"'{tokens[0]}' is not a folder; to name the study say "
                             f"{_right_form(verb, tokens[0])}", field="study")
        raise BenchError("no such run directory (give a run directory, or study=NAME "
                         "key=value ...)", file=str(p))
    dirs = [run_dir(d) for d in runs(tokens, verb)]
    missing = [d for d in dirs if not d.is_dir()]
    if missing:
        import shlex

        raise BenchError(f"the study has not run yet: no {missing[0]} (run it: "
                         f"containmentbench run {shlex.join(tokens)})", file=str(missing[0]))
    return dirs


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def config_drift(tokens: list[str], limit: int = 3) -> list[str]:
    """When the overrides compose another config than the one a run directory was made
    with (its ``config.yaml``): one warning line per such run, naming the first ``limit``
    differing keys with the run's and the composed value. ``headline study=smoke`` after a
    run with ``study.seeds=[1]`` prints the one-seed run's numbers; this says so. A run
    directory given as a path, or a run without ``config.yaml``, gives none."""
    import json

    if not tokens or "=" not in tokens[0]:
        return []
    from containmentbench.config.compose import read_resolved
    from containmentbench.pipeline.plan import run_dir

    out = []
    for data in runs(tokens, "headline"):
        path = run_dir(data) / "config.yaml"
        if not path.is_file():
            continue
        def norm(d: dict[str, Any]) -> dict[str, Any]:
            keep = {k: v for k, v in d.items() if k != "results_dir"}
            return _flat(json.loads(json.dumps(keep, sort_keys=True, default=str)))
        was, now = norm(read_resolved(path)), norm(data)
        diff = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
        if not diff:
            continue
        shown = "; ".join(f"{k} {json.dumps(was.get(k))} in the run, "
                          f"{json.dumps(now.get(k))} composed now" for k in diff[:limit])
        more = f" (and {len(diff) - limit} more)" if len(diff) > limit else ""
        out.append(f"warning: {run_dir(data)} was run with other settings than "
                   f"{' '.join(tokens)} composes now: {shown}{more}; these are the run's "
                   f"numbers (say the run's overrides, or give the run directory)")
    return out


def cross_dir(tokens: list[str]) -> Path | None:
    """The study's ``cross_model/`` folder when the overrides name a several-model study."""
    if not tokens or "=" not in tokens[0]:
        return None
    from containmentbench.pipeline.plan import study_root
    from containmentbench.pipeline.runs import load_runs

    data = load_runs(tokens)
    if len(data) < 2:
        return None
    d = study_root(data[0]) / "cross_model"
    return d if d.is_dir() else None
