"""Table 5 at Table 4 defaults, ours beside the paper in one run (issue 25).

Generates the Table 4 default store (37.65M events; minutes on 2 cores) unless --store names
one, reconstructs --max-buckets runs per workflow with B0, B1, B2 and CIM, and prints the
paper's Amb median (p95) beside ours with the ratio and a flag for cells more than 2x apart,
then recall, precision, candidates per unit, whole-run Amb(E) and Comp(d).

    python bench/cim_table5.py --out /tmp/t4 [--store /tmp/t4] [--max-buckets 1]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from containmentbench.cim.generator import GenParams, generate
from containmentbench.cim.reconstruct import reconstruct_store, summarize
from containmentbench.cim.report import table5
from containmentbench.cim.store import Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/cim-table5"))
    ap.add_argument("--store", type=Path, default=None, help="reuse a generated store")
    ap.add_argument("--max-buckets", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    t0 = time.perf_counter()
    store = a.store
    if store is None:
        s = generate(GenParams(), a.out, jobs=a.jobs)
        store = s.out
        print(f"generated {s.n_events:,} events in {s.seconds:.0f} s")
    per, runs = reconstruct_store(Store(store), max_buckets=a.max_buckets)
    print(f"reconstructed {int(runs['n_evaluated'].sum()):,} events in {runs.height} runs")
    print(table5(summarize(per, ["workflow"])))
    print(f"seconds {time.perf_counter() - t0:.0f}")


if __name__ == "__main__":
    main()
