"""Prompt tokens of an agent's first model call, side by side: this checkout against another
(``--base``, e.g. a worktree of an earlier commit), on the same suite, counted with a real
model's tokenizer and chat template (the prompt the CPU engine prefills).

    python bench/prompt_tokens.py --base /tmp/base --suite exposed_smoke \
        --tokenizer ~/.cache/containmentbench/models/qwen2.5-coder-1.5b-instruct-...

Each checkout runs in its own process (its own package on PYTHONPATH); this checkout is
measured with every tools-offered mode it knows. Prints the mean tokens per first call and
the ratio to the base.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import inspect, json, sys
from transformers import AutoTokenizer
from containmentbench.scenarios.manifest import load_suite
from containmentbench.runtime.episode import Episode, RuntimeConfig
from containmentbench.runtime.state import RolloutSpec
suite, tok_path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
tok = AutoTokenizer.from_pretrained(tok_path)
try:
    from containmentbench.defense.loading import load_defense
    policy = load_defense("none").layers
except ImportError:
    from containmentbench.policies import load_policy
    policy = load_policy("none")
kw = {"tool_mode": "constrained"}
if mode != "-":
    kw["tools_offered"] = mode
n = []
for s in load_suite(suite):
    ep = Episode(s, policy, RolloutSpec("r", "t", "m", "vllm", "none", 1, None),
                 RuntimeConfig(**kw))
    req = ep.request()
    text = tok.apply_chat_template(req.messages, add_generation_prompt=True, tokenize=False)
    n.append(len(tok(text, add_special_tokens=False)["input_ids"]))
print(json.dumps({"mean": sum(n) / len(n), "n": len(n)}))
'''


def measure(root: Path, suite: str, tok: str, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, suite, tok, mode], env=env, cwd=root,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, required=True, help="the other checkout")
    p.add_argument("--suite", default="exposed_smoke")
    p.add_argument("--tokenizer", required=True, help="a model folder with its tokenizer")
    a = p.parse_args()
    base = measure(a.base, a.suite, a.tokenizer, "-")
    print(f"{a.suite}: first-call prompt tokens (constrained mode, {base['n']} scenarios)")
    print(f"  base {a.base}: {base['mean']:.0f}")
    for mode in ("all", "domain"):
        cur = measure(ROOT, a.suite, a.tokenizer, mode)
        print(f"  this checkout, tools offered {mode}: {cur['mean']:.0f} "
              f"(base / this = {base['mean'] / cur['mean']:.2f}x)")


if __name__ == "__main__":
    main()
