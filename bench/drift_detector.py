"""Drift detector precision (paper 002 §5.4): detection and false-flag rates on the generator's
labelled drifts, over several seeds, for the calibrated detector and two ablations side by side.

A *family* is a root delegation with its descendants. Positives: families holding an injected
drift that no approval followed (``gt_drift and not gt_approved`` for some member).
Negatives: families with no injected drift at all. Families whose only drifts were approved are
reported apart (the detector should stay silent there too). Targets (issue 12): detection
>= 80% and false flags <= 5%.

``--drift-rate`` raises the injection rate above the generator default (0.05) so a few seeds
give enough positives for a tight estimate; negatives are the families without injection at
any rate. Only metadata fields the detector reads are used; ``gt_*`` columns only score it.

    .venv/bin/python bench/drift_detector.py --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

import polars as pl

SMALL = {"users": 40, "agents": 400, "delegations_per_day": 320, "events_min": 20,
         "events_max": 80, "loops_w1": 30, "loops_w2": 25, "loops_w3": 40,
         "overlap_rate": 0.4, "files": 20_000, "repos": 100, "channels": 20,
         "tickets": 2_000, "records": 2_000, "chunk_events": 12_000}

VARIANTS = {  # name -> drift() keyword arguments
    "calibrated (default)": {},
    "no unbound attribution": {"attribute": False},
    "restricted only": {"min_sensitivity": "restricted"},
}


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    z, p = 1.959964, k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return mid - half, mid + half


def _labels(store) -> pl.DataFrame:
    return (store.delegations().collect().group_by("root_delegation_id")
            .agg((pl.col("gt_drift") & ~pl.col("gt_approved")).any().alias("pos"),
                 pl.col("gt_drift").any().alias("injected"))
            .rename({"root_delegation_id": "delegation_id"}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--drift-rate", type=float, default=0.2)
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="keep the stores here")
    args = ap.parse_args()

    from containmentbench.cim.drift import drift
    from containmentbench.cim.generator import GenParams, generate
    from containmentbench.cim.store import Store

    root = args.out or Path(tempfile.mkdtemp(prefix="drift-bench-"))
    counts = {v: {"tp": 0, "pos": 0, "fp": 0, "neg": 0, "appr_flag": 0, "appr": 0}
              for v in VARIANTS}
    print(f"generator: {SMALL['users']} users, drift_rate {args.drift_rate}, "
          f"days {args.days}, seeds {args.seeds}")
    print(f"{'seed':>4} {'variant':<24} {'pos':>5} {'detect':>7} {'neg':>6} {'false':>7}")
    try:
        for seed in args.seeds:
            out = root / f"seed-{seed}"
            if not (out / "manifest.json").exists():
                generate(GenParams(**SMALL, seed=seed, days=args.days,
                                   drift_rate=args.drift_rate), out)
            st = Store(out)
            lab = _labels(st)
            for name, kw in VARIANTS.items():
                j = drift(st, **kw).table.select("delegation_id", "flagged").join(
                    lab, on="delegation_id", how="right").with_columns(
                    pl.col("flagged").fill_null(False))
                pos, neg = j.filter("pos"), j.filter(~pl.col("injected"))
                appr = j.filter(pl.col("injected") & ~pl.col("pos"))
                c = counts[name]
                c["tp"] += int(pos["flagged"].sum())
                c["pos"] += pos.height
                c["fp"] += int(neg["flagged"].sum())
                c["neg"] += neg.height
                c["appr_flag"] += int(appr["flagged"].sum())
                c["appr"] += appr.height
                print(f"{seed:>4} {name:<24} {pos.height:>5} "
                      f"{pos['flagged'].mean():>7.3f} {neg.height:>6} "
                      f"{neg['flagged'].mean():>7.3f}")
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)
    print("\npooled over seeds (95% Wilson intervals); targets: detection >= 0.80, "
          "false flags <= 0.05")
    ok = True
    for name, c in counts.items():
        det, fal = c["tp"] / c["pos"], c["fp"] / c["neg"]
        dl, dh = _wilson(c["tp"], c["pos"])
        fl, fh = _wilson(c["fp"], c["neg"])
        ap_rate = c["appr_flag"] / c["appr"] if c["appr"] else math.nan
        meets = det >= 0.80 and fal <= 0.05
        print(f"  {name:<24} detection {det:.3f} [{dl:.3f}, {dh:.3f}] ({c['tp']}/{c['pos']})"
              f"  false flags {fal:.3f} [{fl:.3f}, {fh:.3f}] ({c['fp']}/{c['neg']})"
              f"  approved-only flagged {ap_rate:.3f}  {'meets' if meets else 'misses'} targets")
        if name == "calibrated (default)":
            ok = meets
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
