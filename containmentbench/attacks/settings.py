"""The adaptive study's settings (``study.adaptive``), checked before any query.

Paper 000 §6.3 pre-specifies the protocol: ten strategies, the K2+F1 condition (knowledge:
policy family + structured tool contract; feedback: the common funnel stage only), a bounded
tree search (3 roots, branching 3, width 6, depth 4, 2 restarts, at most 40 target queries per
restart), family-disjoint 48/144/24 cluster splits and five fresh rollout seeds for the frozen
candidates. Budgets above config/bounds.py, an unknown strategy or condition, seeds shared
between search, qualification and evaluation: one-line error naming the field (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from containmentbench.attacks.strategies import check_strategies
from containmentbench.config.bounds import check_value
from containmentbench.errors import BenchError

PROTOCOLS = ("paper", "target_preserving")  # Table 18 (attacks/replay.py)
KNOWLEDGE = ("K2",)   # policy family + structured tool contract (the main condition, §6.3)
FEEDBACK = ("F1",)    # the common funnel-stage view only
ATTACK_STAGES = ("security", "memory_recovery")  # stages whose scenarios carry an exact goal
BOUNDED = ("roots", "branching", "width", "depth", "restarts", "max_queries_per_restart",
           "freeze_top", "development_clusters", "heldout_clusters", "audit_clusters",
           "search_seeds", "qualification_seeds", "split_seed", "known_good_rows",
           "development_rollouts", "heldout_rollouts", "development_min_rate",
           "heldout_min_rate", "heldout_min_domains")


@dataclass(frozen=True)
class Adaptive:
    """The validated ``study.adaptive`` block plus what it needs from the study."""

    raw: dict[str, Any]
    eval_seeds: tuple[int, ...]
    defenses: tuple[str, ...]
    stages: tuple[str, ...]
    policy_family: str

    def __getattr__(self, name: str) -> Any:
        try:
            return self.raw[name]
        except KeyError:
            raise AttributeError(name) from None


def is_adaptive(data: dict[str, Any]) -> bool:
    return bool((data["study"].get("adaptive") or {}).get("enabled"))


def settings(data: dict[str, Any]) -> Adaptive:
    """Validate ``study.adaptive`` of a resolved study config (before any query)."""
    a = dict(data["study"].get("adaptive") or {})
    if not a.get("enabled"):
        raise BenchError("this study is not an adaptive study (study.adaptive.enabled is "
                         "false)", field="study.adaptive.enabled")
    for key in BOUNDED:
        check_value(f"study.adaptive.{key}", a.get(key))
    check_strategies(list(a["strategies"]))
    if a["knowledge"] not in KNOWLEDGE:
        raise BenchError(f"unknown knowledge condition '{a['knowledge']}' (built: "
                         f"{', '.join(KNOWLEDGE)})", field="study.adaptive.knowledge")
    if a["feedback"] not in FEEDBACK:
        raise BenchError(f"unknown feedback condition '{a['feedback']}' (built: "
                         f"{', '.join(FEEDBACK)})", field="study.adaptive.feedback")
    if a["roots"] > len(a["strategies"]):
        raise BenchError(f"{a['roots']} roots need at least as many strategies (have "
                         f"{len(a['strategies'])})", field="study.adaptive.roots")
    study = data["study"]
    if a["optimized_for"] not in data["defenses"]:
        raise BenchError(f"defense '{a['optimized_for']}' has no configuration",
                         field="study.adaptive.optimized_for")
    stages = tuple(s for s in study["stages"] if s in ATTACK_STAGES)
    if not stages or len(stages) != len(study["stages"]):
        raise BenchError("an adaptive study draws its clusters from attacked stages only "
                         f"({', '.join(ATTACK_STAGES)})", field="study.stages")
    groups = {"study.adaptive.search_seeds": set(a["search_seeds"]),
              "study.adaptive.qualification_seeds": set(a["qualification_seeds"]),
              "study.seeds": {int(s) for s in study["seeds"]}}
    for name, seeds in groups.items():
        if not seeds:
            raise BenchError("at least one seed is needed", field=name)
    names = list(groups)
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            shared = sorted(groups[x] & groups[y])
            if shared:  # five *fresh* seeds for the frozen candidates (§6.3)
                raise BenchError(f"seed {shared[0]} is also in {x}; search, qualification "
                                 f"and evaluation seeds must be distinct", field=y)
    if a["table18_protocol"] not in PROTOCOLS:
        raise BenchError(f"unknown Table 18 protocol '{a['table18_protocol']}' (one of "
                         f"{', '.join(PROTOCOLS)})", field="study.adaptive.table18_protocol")
    for key in ("transfer_defenses", "instance_defenses", "defense_specific"):
        for i, d in enumerate(a[key]):
            if d not in study["defenses"]:
                raise BenchError(f"defense '{d}' is not a defense of this study (the replay "
                                 f"runs study.defenses)", field=f"study.adaptive.{key}[{i}]")
        if len(set(a[key])) != len(a[key]):
            raise BenchError("a defense is listed twice", field=f"study.adaptive.{key}")
    if a["table18_protocol"] == "paper" and not a["transfer_defenses"]:
        raise BenchError("the paper's protocol replays under at least one defense",
                         field="study.adaptive.transfer_defenses")
    family = data["defenses"][a["optimized_for"]].get("family", a["optimized_for"])
    return Adaptive(a, tuple(int(s) for s in study["seeds"]), tuple(study["defenses"]),
                    stages, str(family))


@dataclass(frozen=True)
class Variant:
    """One bounded search of the protocol (paper 000 §6.3): ``transfer`` -- the first
    search, not target-preserving, optimized for ``optimized_for`` (Table 18's candidates);
    ``target`` -- the target-preserving search the staged qualification replays (Table 19);
    ``defense-<name>`` -- defense-specific optimization against one defense, after a
    passing qualification. All share the configured bounds."""

    name: str
    optimized_for: str
    target_preserving: bool
    policy_family: str


def variant(data: dict[str, Any], name: str = "target") -> Variant:
    a = data["study"]["adaptive"]
    if name == "target":
        d, tp = a["optimized_for"], bool(a["target_preserving"])
    elif name == "transfer":
        d, tp = a["optimized_for"], False
    elif name.startswith("defense-") and name[len("defense-"):] in a["defense_specific"]:
        d, tp = name[len("defense-"):], True
    else:
        raise BenchError(f"unknown search '{name}' (transfer, target, or defense-<name> for "
                         f"a defense of study.adaptive.defense_specific)", field="variant")
    return Variant(name, d, tp, str(data["defenses"][d].get("family", d)))


def searches(data: dict[str, Any]) -> tuple[str, ...]:
    """The searches a study runs before qualification (the rules' ``{search}`` values):
    the paper's protocol needs the first transfer search for Table 18 and the
    target-preserving one for Table 19; the named variant only the latter."""
    a = data["study"]["adaptive"]
    return ("transfer", "target") if a.get("table18_protocol", "paper") == "paper" \
        else ("target",)


def digest(data: dict[str, Any], name: str = "target") -> dict[str, Any]:
    """What a query log belongs to: a log written under other settings is refused."""
    from containmentbench.pipeline.plan import backend_identity

    a = data["study"]["adaptive"]
    v = variant(data, name)
    return {"study": data["study"]["name"], "suite": data["study"]["suite"],
            "model": data["model"], "backend": backend_identity(data["backend"]),
            "runtime": data["runtime"],
            "defense": data["defenses"][v.optimized_for],
            "search": {**{k: a[k] for k in ("strategies", "knowledge", "feedback", "roots",
                                            "branching", "width", "depth", "restarts",
                                            "max_queries_per_restart", "search_seeds")},
                       "optimized_for": v.optimized_for,
                       "target_preserving": v.target_preserving}}


def rule_key(data: dict[str, Any]) -> str:
    """A Snakemake params value: changes whenever the search settings, the study (splits,
    seeds, defenses), the model or the backend identity change, so the steps rerun (and refuse
    to mix with an earlier log or suite) rather than silently keep stale outputs."""
    from containmentbench.canonical import sha256_json

    return sha256_json({"search": digest(data), "study": data["study"],
                        "defenses": data["defenses"]})[:16]
