"""CI gate for the real_cpu study: frozen and verified, results of the real model (not the
simulated agent), exposure above zero on every attacked and active-tainted rollout group, and
(when the study has several seeds) seeds that gave distinct traces. Prints the figures; exit 1
names what failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from containmentbench.freeze.manifest import verify


def main(run: Path) -> int:
    problems = [f"verify: {p}" for p in verify(run)]
    manifest = json.loads((run / "MANIFEST.json").read_text())
    if manifest["simulated_agent"] or manifest["backends"] != ["vllm"]:
        problems.append(f"not a vllm model run: backends {manifest['backends']}")
    head = pl.read_parquet(run / "tables" / "exposure_validity.parquet")
    utility = pl.read_parquet(run / "tables" / "utility_by_topology.parquet")
    exposure = head.filter(pl.col("quantity").str.starts_with("exposure"))
    if exposure.height == 0 or exposure["estimate"].min() <= 0:
        problems.append(f"exposure not above zero: {exposure.rows()}")
    t26 = pl.read_parquet(run / "tables" / "table26_seed_variance.parquet")
    # one seed (the study's size on two cores): nothing to compare; per-request seeds are
    # measured by tests/models/test_vllm_backend.py
    if t26["n_seeds"].max() > 1 and t26["distinct_traces"].max() <= 1.0:
        problems.append("no scenario's seeds gave distinct traces (seeds are copies)")
    print(head.filter(pl.col("defense") == "none").select("quantity", "n", "estimate", "ci_low",
                                                          "ci_high"))
    print(utility.filter(pl.col("defense") == "none").select(
        "quantity", "topology", "n", "estimate", "ci_low", "ci_high"))
    print(f"decodings {manifest['decodings']}; tool modes {manifest['tool_modes']}; "
          f"distinct traces per scenario (of {t26['n_seeds'].max()} seeds): "
          f"{t26['distinct_traces'].min():.2f}..{t26['distinct_traces'].max():.2f}")
    for p in problems:
        print(f"check_real_cpu: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
