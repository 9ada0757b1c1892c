"""Tables must not depend on the thread count: a 1-CPU Slurm job and a 2-core laptop wrote
different Table 26 bytes (polars' multi-threaded group-by sums floats in a thread-dependent
order) until table means became exactly rounded sums."""

from __future__ import annotations

import math
import os
import subprocess
import sys

from containmentbench.analysis.exact import fmean, fstd

SCRIPT = """
import numpy as np, polars as pl
from containmentbench.analysis.seeds import seed_variance
rng = np.random.default_rng(0)
n = 200_000
df = pl.DataFrame({"stage": rng.choice(["a", "b", "c", "d"], n),
                   "defense": rng.choice([f"d{i}" for i in range(7)], n),
                   "seed": rng.integers(1, 6, n), "v": rng.random(n)})
out = seed_variance(df, ["stage", "defense"], "seed", "v")
print(out["mean"].to_numpy().tobytes().hex() + out["std"].to_numpy().tobytes().hex())
"""


def test_seed_variance_is_thread_count_independent():
    outs = set()
    for threads in ("1", "4"):
        env = {**os.environ, "POLARS_MAX_THREADS": threads}
        outs.add(subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True,
                                capture_output=True, text=True).stdout)
    assert len(outs) == 1


def test_exact_mean_and_std():
    vals = [0.1] * 10 + [1e16, -1e16]
    assert fmean(vals) == math.fsum(vals) / 12  # 1.0 / 12, where naive summation gives 0
    assert fmean(list(reversed(vals))) == fmean(vals)
    assert fmean([]) is None and fmean([None, float("nan")]) is None
    assert fstd([1.0, 2.0, 3.0]) == 1.0 and fstd([5.0]) is None
