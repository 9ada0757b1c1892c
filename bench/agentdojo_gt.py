"""Run inside an environment with agentdojo installed (bench/rollout_throughput.py does this in
a separate venv): time AgentDojo's ground-truth pipeline (no LLM) on its workspace suite and
print one JSON line with per-task times and step counts."""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def main() -> None:
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.task_suite.load_suites import get_suite

    suite = get_suite(sys.argv[1] if len(sys.argv) > 1 else "v1.2", "workspace")
    tasks = list(suite.user_tasks.values())
    per_task, cpu, steps, solved = [], [], [], 0
    for t in tasks[:2]:  # warm-up (imports, YAML caches)
        suite.run_task_with_pipeline(GroundTruthPipeline(t), t, None, {})
    for t in tasks:
        env = suite.load_and_inject_default_environment({})
        steps.append(len(t.ground_truth(env)))
        t0, c0 = time.perf_counter(), time.process_time()
        utility, _ = suite.run_task_with_pipeline(GroundTruthPipeline(t), t, None, {})
        per_task.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        solved += bool(utility)
    print(json.dumps({"tasks": len(tasks), "mean_s": statistics.fmean(per_task),
                      "median_s": statistics.median(per_task),
                      "cpu_mean_s": statistics.fmean(cpu),
                      "steps_mean": statistics.fmean(steps), "total_steps": sum(steps),
                      "total_s": sum(per_task), "ground_truth_solved": solved}))


if __name__ == "__main__":
    main()
