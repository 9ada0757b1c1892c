"""Intervals and groups of the labelled suite's scores: case-bootstrap 95 % intervals of
P/R/F1, the per-evidence-group and per-negative-kind rows, and the semantic tier's AUC.

Paper 001 reports P/R/F1 as point values (Tables 3-5, 10) and is silent on their
uncertainty. We resample *cases* (scenarios, each already a majority vote over its runs,
§5.1): ``B`` resamples of the n scenario rows with replacement, P/R/F1 of each
(:func:`.tables.prf`), the equal-tailed percentile interval
(:func:`analysis.bootstrap.percentile_interval`). A resample in which a figure is undefined
(no predicted positives for precision; no positives for recall) is left out of that
figure's interval, and the count of those left out is reported (``*_undefined``).

Groups (the paper's Table 5 groups positives only, by evidence, and is silent on precision
per group; the choice here): an **evidence group**'s cases are its positives and every
negative of the profile (precision then says how much of the detector's output on that kind
of flow is right, given the negatives it meets); a **negative kind**'s cases are every
positive of the profile and that kind's negatives, with the kind's false-positive rate
(flagged negatives / negatives of the kind) beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from containmentbench.analysis.bootstrap import percentile_interval
from containmentbench.audit.tables import prf
from containmentbench.canonical import derive_rng

RESAMPLES = 2000
CONFIDENCE = 0.95


def _interval(x: np.ndarray) -> tuple[float | None, float | None, int]:
    ok = x[np.isfinite(x)]
    if ok.size < 2:
        return None, None, int(x.size - ok.size)
    lo, hi = percentile_interval(ok, CONFIDENCE)
    return lo, hi, int(x.size - ok.size)


def prf_interval(positive: Sequence[bool], flagged: Sequence[bool], key: Sequence[Any],
                 resamples: int = RESAMPLES) -> dict[str, Any]:
    """Counts, P/R/F1 and their case-bootstrap intervals; ``key`` seeds the resampling (the
    same key and cases give the same bytes)."""
    pos = np.asarray(positive, dtype=bool)
    det = np.asarray(flagged, dtype=bool)
    n = pos.size
    tp, fp = int(np.sum(pos & det)), int(np.sum(~pos & det))
    fn = int(np.sum(pos & ~det))
    p, r, f1 = prf(tp, fp, fn)
    out: dict[str, Any] = {"scenarios": n, "positives": int(pos.sum()), "tp": tp, "fp": fp,
                           "fn": fn, "tn": n - tp - fp - fn, "precision": p, "recall": r,
                           "f1": f1}
    if n == 0:
        return {**out, **{f"{m}_{e}": None for m in ("precision", "recall", "f1")
                          for e in ("lo", "hi", "undefined")}}
    idx = derive_rng("taintbench-bootstrap", *key).integers(0, n, size=(resamples, n))
    bp, bd = pos[idx], det[idx]
    btp = np.sum(bp & bd, axis=1).astype(float)
    bfp = np.sum(~bp & bd, axis=1).astype(float)
    bfn = np.sum(bp & ~bd, axis=1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        bprec = np.where(btp + bfp > 0, btp / (btp + bfp), np.nan)
        brec = np.where(btp + bfn > 0, btp / (btp + bfn), np.nan)
        bf1 = np.where(np.isfinite(bprec) & np.isfinite(brec),
                       np.where(bprec + brec > 0, 2 * bprec * brec / (bprec + brec), 0.0),
                       np.nan)
    for name, xs in (("precision", bprec), ("recall", brec), ("f1", bf1)):
        lo, hi, undefined = _interval(xs)
        out.update({f"{name}_lo": lo, f"{name}_hi": hi, f"{name}_undefined": undefined})
    return out


def rate_interval(flagged: Sequence[bool], key: Sequence[Any],
                  resamples: int = RESAMPLES) -> tuple[float | None, float | None, float | None]:
    """A share (false-positive rate of a negative kind) and its case-bootstrap interval."""
    x = np.asarray(flagged, dtype=float)
    if x.size == 0:
        return None, None, None
    idx = derive_rng("taintbench-bootstrap-rate", *key).integers(0, x.size,
                                                                 size=(resamples, x.size))
    lo, hi, _ = _interval(x[idx].mean(axis=1))
    return float(x.mean()), lo, hi


def group_rows(v: Sequence[dict[str, Any]], det: str, key: Sequence[Any]
               ) -> list[dict[str, Any]]:
    """One row per evidence group and per negative kind (module docstring) for the verdict
    column ``det`` of vote rows ``v``."""
    pos = [r for r in v if r["positive"]]
    neg = [r for r in v if not r["positive"]]
    out = []
    for ev in sorted({r["evidence"] for r in pos}):
        cases = [r for r in pos if r["evidence"] == ev] + neg
        out.append({"group_kind": "evidence", "group": ev, "fp_rate": None,
                    "fp_rate_lo": None, "fp_rate_hi": None,
                    **prf_interval([r["positive"] for r in cases], [r[det] for r in cases],
                                   (*key, "evidence", ev))})
    for kind in sorted({r["subfamily"] for r in neg}):
        mine = [r for r in neg if r["subfamily"] == kind]
        cases = pos + mine
        rate, lo, hi = rate_interval([r[det] for r in mine], (*key, "rate", kind))
        out.append({"group_kind": "negative_kind", "group": kind, "fp_rate": rate,
                    "fp_rate_lo": lo, "fp_rate_hi": hi,
                    **prf_interval([r["positive"] for r in cases], [r[det] for r in cases],
                                   (*key, "negative", kind))})
    return out


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """Area under the ROC curve: P(a positive scores above a negative), ties half (the
    Mann-Whitney U / (n_pos n_neg)). Paper 001 reports no AUC (issue 34 asks for it)."""
    a, b = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
    if a.size == 0 or b.size == 0:
        return None
    gt = np.sum(a[:, None] > b[None, :])
    eq = np.sum(a[:, None] == b[None, :])
    return float((gt + 0.5 * eq) / (a.size * b.size))
