"""The AgentDojo adapter's own cost per task against AgentDojo alone on the same tasks
(issue: external traces, "Speed"; target: the adapter adds at most 20%).

For every task (all user tasks of the four suites, clean, plus the first N injection tasks
paired with each user task), measured side by side and interleaved in one process:

* AgentDojo alone: ``TaskSuite.run_task_with_pipeline`` with its own ``FunctionsRuntime``, the
  ground-truth pipeline, the same injections and an environment from the same loader;
* the adapter: the same task through our gateway (proposal, decision, commit with the
  environment diff, tool result, trace recorder, AgentDojo's checkers on the executed calls)
  under ``none`` and under ``intent_ledger_v2``, plus building the shard's Arrow tables.

Times are CPU seconds of this process (``time.process_time``), so a busy shared machine does
not distort the ratio; the minimum over repeats is kept. Prints per-suite and overall
ratios; no assertion on time.

    python bench/agentdojo_adapter_overhead.py [--pairs-per-task 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")


def measure(suites: list[str], pairs_per_task: int = 2, repeat: int = 3,
            echo: bool = True) -> dict[str, float]:
    """Seconds per condition summed over the suites (the least-disturbed repeat per suite)."""
    from containmentbench.adapters.agentdojo import run as R
    from containmentbench.adapters.agentdojo import tasks as T
    from containmentbench.defense.loading import load_defense

    tot = {"native": 0.0, "none": 0.0, "intent_ledger_v2": 0.0, "tasks": 0}
    for suite in suites:
        users = T.sort_ids(T.suite(suite).user_tasks)
        inj = T.sort_ids(T.suite(suite).injection_tasks)[:pairs_per_task]
        specs = R.specs_for(suite, users, inj, "direct")
        cfgs = {d: R.RunSettings("bench", suite, load_defense(d), 1, native=False)
                for d in ("none", "intent_ledger_v2")}
        R.run_native(cfgs["none"], specs[0])  # warm-up (imports, caches)
        R.run_specs(cfgs["none"], specs[:1])
        runs: dict[str, list[float]] = {k: [] for k in ("native", "none", "intent_ledger_v2")}
        for _ in range(repeat):
            t = dict.fromkeys(runs, 0.0)
            outs: dict[str, list] = {d: [] for d in cfgs}
            for spec in specs:  # interleaved, task by task
                t0 = time.process_time()
                R.run_native(cfgs["none"], spec)
                t["native"] += time.process_time() - t0
                for d, cfg in cfgs.items():
                    t0 = time.process_time()
                    outs[d].append(R.run_adapter(cfg, spec))
                    t[d] += time.process_time() - t0
            for d, cfg in cfgs.items():  # the shard's Arrow tables, built once as a shard does
                t0 = time.process_time()
                R.shard_tables(cfg, outs[d])
                t[d] += time.process_time() - t0
            for k in runs:
                runs[k].append(t[k])
        m = {k: min(v) for k, v in runs.items()}
        for k in runs:
            tot[k] += m[k]
        tot["tasks"] += len(specs)
        if echo:
            print(f"{suite}: {len(specs)} tasks; AgentDojo alone "
                  f"{1e3 * m['native'] / len(specs):.1f} ms/task; adapter (none) "
                  f"{1e3 * m['none'] / len(specs):.1f} ms/task = {m['none'] / m['native']:.3f}x;"
                  f" adapter (intent_ledger_v2) {1e3 * m['intent_ledger_v2'] / len(specs):.1f} "
                  f"ms/task = {m['intent_ledger_v2'] / m['native']:.3f}x (repeat spread "
                  f"{statistics.pstdev(runs['none']) / m['none']:.1%})")
    return tot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs-per-task", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--suites", default="workspace,slack,banking,travel")
    args = ap.parse_args()
    tot = measure(args.suites.split(","), args.pairs_per_task, args.repeat)
    print(f"all suites: {tot['tasks']} tasks; adapter/AgentDojo-alone cost ratio: none "
          f"{tot['none'] / tot['native']:.3f}x, intent_ledger_v2 "
          f"{tot['intent_ledger_v2'] / tot['native']:.3f}x (target <= 1.20x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
