"""Fixed cost of one ``containmentbench`` job process, measured side by side in one run.

A study runs one process per rollout job (plus reparse, metrics, analysis), so whatever a
process pays before and after its own work is paid once per job. This benchmark runs, for
this checkout and optionally for another one (``--base DIR``, e.g. a worktree of an older
commit), interleaved, K times each:

* ``python -c pass``                     the interpreter alone (the floor no job can beat);
* ``containmentbench rollout`` of a shard of ONE full_main scenario through the study path
  (``--study-config`` + ``--shard``): start-up, CLI, config, shard plan, scenario load,
  backend, one sim rollout, Parquet write of the shard. Its CPU time minus the interpreter
  floor is the job's fixed cost (the one rollout itself is ~5 ms of it);
* ``pandas`` in the job process (whether pyarrow pulled it in).

CPU time (user + sys of the child) is reported, not wall time, so a loaded machine inflates
it less; medians of K. Target: fixed cost <= 0.15 s.

    python bench/job_overhead.py [--repeat 7] [--base /path/to/older/checkout]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "fm-cln-0001"
SHARD = "sim-default/none/seed=1/clean/shard-000"
# the console script's work, plus one line at exit saying whether pandas got imported
PROBE = ("import atexit, runpy, sys; "
         "atexit.register(lambda: print('pandas' in sys.modules, file=sys.stderr)); "
         "sys.argv = ['containmentbench'] + sys.argv[1:]; "
         "runpy.run_module('containmentbench.cli.main', run_name='__main__')")


def _cpu(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out.stderr


def _config(tree: Path, tmp: Path) -> Path:
    """A resolved one-scenario full_main config, composed by the tree under test."""
    path = tmp / f"config-{abs(hash(str(tree)))}" / "config.yaml"
    path.parent.mkdir()
    code = ("import sys; from pathlib import Path; "
            "from containmentbench.config.compose import load_study, save_resolved; "
            f"d = load_study(['study=full_main', 'study.scenarios=[{SCENARIO}]', "
            f"'results_dir={tmp}']); save_resolved(d, Path(sys.argv[1]))\n"
            # as the Snakefile pre-flight does, where the tree has the plan file
            "try:\n from containmentbench.pipeline.planfile import save_plan\n"
            "except ImportError:\n pass\n"
            "else:\n from containmentbench.pipeline.plan import shards\n"
            " save_plan(d, Path(sys.argv[1]), shards(d))")
    subprocess.run([sys.executable, "-c", code, str(path)], env=_env(tree), check=True,
                   cwd=tmp, capture_output=True)
    return path


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    # ahead of the editable install of this checkout (children run in a scratch folder, so
    # the current directory does not shadow it)
    env["PYTHONPATH"] = str(tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(trees: dict[str, Path], repeat: int) -> dict[str, dict[str, float]]:
    res: dict[str, dict[str, list[float]]] = {k: {"python": [], "job": []} for k in trees}
    pandas: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="cb-job-") as t:
        tmp = Path(t)
        cfgs = {k: _config(tree, tmp) for k, tree in trees.items()}
        for i in range(repeat + 1):  # round 0 warms the bytecode caches, not counted
            for name, tree in trees.items():
                env = _env(tree)
                py, _ = _cpu([sys.executable, "-c", "pass"], env, tmp)
                out = tmp / f"{name}-{i}"
                job, err = _cpu([sys.executable, "-c", PROBE, "rollout", "--study-config",
                                 str(cfgs[name]), "--shard", SHARD, "--out", str(out),
                                 "--quiet"], env, tmp)
                pandas[name] = err.strip().splitlines()[-1] == "True"
                if i:
                    res[name]["python"].append(py)
                    res[name]["job"].append(job)
    return {k: {"python": statistics.median(v["python"]), "job": statistics.median(v["job"]),
                "fixed": statistics.median(v["job"]) - statistics.median(v["python"]),
                "pandas": pandas[k]} for k, v in res.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--base", type=Path, default=None,
                    help="another checkout to compare with (e.g. a worktree of main)")
    args = ap.parse_args()
    trees = {"this": ROOT}
    if args.base:
        trees = {"base": args.base.resolve(), "this": ROOT}
    r = measure(trees, args.repeat)
    load = os.getloadavg()[0]
    print(f"job fixed cost, CPU s (median of {args.repeat}; load average {load:.1f} on "
          f"{os.cpu_count()} cores):")
    for name, v in r.items():
        print(f"  {name:5s} {trees[name]}: interpreter {v['python']:.3f} s, one-scenario "
              f"rollout job {v['job']:.3f} s, fixed cost {v['fixed']:.3f} s "
              f"(target <= 0.15 s: {'met' if v['fixed'] <= 0.15 else 'NOT met'}); pandas "
              f"imported: {v['pandas']}")
    if "base" in r:
        print(f"  ratio base / this: job {r['base']['job'] / r['this']['job']:.2f}x, fixed "
              f"cost {r['base']['fixed'] / max(r['this']['fixed'], 1e-9):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
