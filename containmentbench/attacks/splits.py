"""Family-disjoint splits of the attacked scenario clusters (paper 000 §6.3: 48 development,
144 held-out confirmatory and 24 instance-audit clusters, "without family leakage").

A family is the generator's design family (``stage/domain/goal/carrier[/strategy]``,
scenarios/generator.py), a cluster its replicate (``cluster_id``). Whole families are
assigned, in an order drawn from ``split_seed``, to the audit, development and held-out
splits until each holds exactly its cluster count; a count that whole families cannot meet is
a one-line error naming the field. :func:`check_disjoint` refuses any overlap of families or
clusters between splits (also for a splits file read back from disk).
"""

from __future__ import annotations

from typing import Any

from containmentbench.canonical import sha256_json
from containmentbench.errors import BenchError
from containmentbench.scenarios.model import Scenario

SPLITS = ("development", "heldout", "audit")
FIELD = {"development": "study.adaptive.development_clusters",
         "heldout": "study.adaptive.heldout_clusters",
         "audit": "study.adaptive.audit_clusters"}


def attacked_pool(suite: str, stages: tuple[str, ...]) -> list[Scenario]:
    """The scenarios with a pre-specified exact goal and an injected sentence."""
    from containmentbench.scenarios.manifest import load_suite

    out = []
    for st in stages:
        out += [s for s in load_suite(suite, st)
                if (s.attacker_goal or {}).get("violation") and s.meta.get("injection")]
    return out


def make_splits(pool: list[Scenario], sizes: dict[str, int], seed: int) -> dict[str, Any]:
    fams: dict[str, set[str]] = {}
    by_cluster: dict[str, list[str]] = {}
    for s in pool:
        fams.setdefault(s.family, set()).add(s.cluster_id)
        by_cluster.setdefault(s.cluster_id, []).append(s.id)
    order = sorted(fams, key=lambda f: (sha256_json({"split_seed": seed, "family": f}), f))
    free = list(order)
    out: dict[str, Any] = {}
    for name in ("audit", "development", "heldout"):
        want, have, taken = sizes[name], 0, []
        for f in list(free):
            n = len(fams[f])
            if have + n <= want:
                taken.append(f)
                have += n
                free.remove(f)
            if have == want:
                break
        if have != want:
            raise BenchError(f"cannot form {want} {name} clusters from whole scenario "
                             f"families of the pool ({len(pool)} attacked scenarios in "
                             f"{len(fams)} families; {have} reached)", field=FIELD[name])
        clusters = sorted(c for f in taken for c in fams[f])
        out[name] = {"families": sorted(taken), "clusters": clusters,
                     "scenarios": sorted(i for c in clusters for i in by_cluster[c])}
    result = {"split_seed": seed, "sizes": dict(sizes), "splits": out}
    check_disjoint(result)
    return result


def check_disjoint(splits: dict[str, Any], file: str | None = None) -> None:
    """No family, cluster or scenario in two splits."""
    parts = splits.get("splits") if isinstance(splits, dict) else None
    if not isinstance(parts, dict) or set(parts) != set(SPLITS):
        raise BenchError(f"expected splits {', '.join(SPLITS)}", file=file, field="splits")
    for key in ("families", "clusters", "scenarios"):
        seen: dict[str, str] = {}
        for name in SPLITS:
            for x in parts[name].get(key, []):
                if x in seen and seen[x] != name:
                    raise BenchError(f"{key[:-1]} '{x}' is in both the {seen[x]} and the "
                                     f"{name} split (splits must be family-disjoint)",
                                     file=file, field=f"splits.{name}.{key}")
                seen[x] = name


def load_splits(path: str) -> dict[str, Any]:
    from containmentbench.integrity.inputs import load_json

    data = load_json(path, "splits")
    check_disjoint(data, path)
    return data
